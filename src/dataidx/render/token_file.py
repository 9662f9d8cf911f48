"""A spec's token file: a 64-byte header, then every training entry's words, in entry order.

The file is named by the spec's fingerprint and lives in the store's token folder
(``<store>.tokens`` beside a store file; see :func:`dataidx.store.tokens_folder`). It is written
under a hidden temporary name, synced, and renamed into place only when complete, so a full disk,
a crash or Ctrl-C leaves no file that looks finished; it is never rewritten in place (a reader
that mapped it keeps the file it mapped). The header names the spec's fingerprint, the word
size and the word count: opening checks them and the file's size against the store's record,
which costs nothing at any size; ``dataidx verify --tokens`` checks the words' sha256.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StaleStoreError, StoreError

MAGIC = b"DIDXTOK1"
#: magic, word bytes, reserved, words, entries, the spec's fingerprint (sha256, raw)
HEADER = struct.Struct("<8sII QQ 32s")
assert HEADER.size == 64


def token_file_name(fingerprint: str) -> str:
    """The name of a spec's token file: its fingerprint, so another rendering never shares it."""
    return f"{fingerprint}.tokens"


class TokenFileWriter:
    """Appends words to a hidden temporary file and publishes it under its name when complete.

    Example::

        with TokenFileWriter(folder, fingerprint, np.dtype("<u2")) as writer:
            offset = writer.append(words)
            writer.publish(entries)
    """

    def __init__(self, folder: Path, fingerprint: str, dtype: np.dtype) -> None:
        self.folder, self.fingerprint, self.dtype = folder, fingerprint, dtype
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{folder}: cannot make the token folder: {exc.strerror or exc}") from None
        self.path = folder / token_file_name(fingerprint)
        self.temporary = folder / f".{self.path.name}.{os.getpid()}.tmp"
        self.file = open(self.temporary, "wb")
        self.file.write(bytes(HEADER.size))
        self.file.flush()  # render workers fork after this: none inherits bytes waiting in the buffer
        self.words = 0
        self.digest = hashlib.sha256()

    def __enter__(self) -> TokenFileWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Whatever happened, no temporary file stays behind."""
        self.file.close()
        self.temporary.unlink(missing_ok=True)

    def append(self, words: np.ndarray) -> int:
        """Write ``words``; returns the offset (in words) of the first."""
        data = np.ascontiguousarray(words, dtype=self.dtype).tobytes()
        try:
            self.file.write(data)
        except OSError as exc:
            raise StoreError(f"{self.temporary}: cannot write tokens: {exc.strerror or exc}") from None
        self.digest.update(data)
        offset, self.words = self.words, self.words + len(words)
        return offset

    @property
    def bytes(self) -> int:
        return HEADER.size + self.words * self.dtype.itemsize

    def publish(self, entries: int) -> None:
        """Write the header, sync, and rename the file into place (atomically)."""
        try:
            self.file.seek(0)
            self.file.write(HEADER.pack(MAGIC, self.dtype.itemsize, 0, self.words, entries,
                                        bytes.fromhex(self.fingerprint)))
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temporary, self.path)
            folder = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot publish the token file: {exc.strerror or exc}") from None


class TokenFile:
    """A published token file, checked against what the store records, mapped once per process.

    Pickles without its map: a DataLoader worker maps the file again (the same inode: the name is
    never rewritten in place, and a missing or replaced file is refused)."""

    def __init__(self, path: Path, *, spec: str, fingerprint: str, word_bytes: int, words: int) -> None:
        self.path, self.spec, self.fingerprint = path, spec, fingerprint
        self.word_bytes, self.words = word_bytes, words
        self._mapped: tuple[int, np.ndarray] | None = None
        self.check()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_mapped": None}

    def check(self) -> None:
        """One line naming what is wrong, if the file is not the one the store recorded."""
        fix = f"run dataidx render --store-tokens again for spec '{self.spec}'"
        try:
            with open(self.path, "rb") as file:
                header = file.read(HEADER.size)
                size = os.fstat(file.fileno()).st_size
        except FileNotFoundError:
            raise StaleStoreError(f"{self.path}: the token file of spec '{self.spec}' is missing (a store moved "
                                  f"without its .tokens folder?); move it beside the store, or {fix}") from None
        except OSError as exc:
            raise StaleStoreError(f"{self.path}: cannot read the token file of spec '{self.spec}': "
                                  f"{exc.strerror or exc}") from None
        if len(header) < HEADER.size or header[:8] != MAGIC:
            raise StaleStoreError(f"{self.path}: not a dataidx token file; {fix}")
        _, word_bytes, _, words, _, fingerprint = HEADER.unpack(header)
        if fingerprint.hex() != self.fingerprint:
            raise StaleStoreError(f"{self.path}: holds the tokens of another rendering (fingerprint "
                                  f"{fingerprint.hex()[:12]}, spec '{self.spec}' is {self.fingerprint[:12]}); {fix}")
        expected = HEADER.size + self.words * self.word_bytes
        if (word_bytes, words) != (self.word_bytes, self.words) or size != expected:
            raise StaleStoreError(f"{self.path}: {size} bytes, but spec '{self.spec}' recorded {expected} "
                                  f"({self.words} words of {self.word_bytes} bytes): truncated or edited; {fix}")

    @property
    def words_array(self) -> np.ndarray:
        """The file's words, memory-mapped (read-only) in this process."""
        mapped = self._mapped
        if mapped is None or mapped[0] != os.getpid():
            self.check()  # a worker maps what its parent checked: the file may have gone since
            dtype = np.dtype("<u2") if self.word_bytes == 2 else np.dtype("<u4")
            array = (np.memmap(self.path, dtype=dtype, mode="r", offset=HEADER.size, shape=(self.words,))
                     if self.words else np.empty(0, dtype=dtype))
            mapped = self._mapped = (os.getpid(), array)
        return mapped[1]

    def sha256(self) -> str:
        """sha256 of the words (the file after its header), read in blocks."""
        digest = hashlib.sha256()
        with open(self.path, "rb") as file:
            file.seek(HEADER.size)
            while block := file.read(1 << 22):
                digest.update(block)
        return digest.hexdigest()

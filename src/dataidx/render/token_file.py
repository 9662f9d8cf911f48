"""A spec's token file: a header, every training entry's words in entry order, then an index of
where each base entry's words start, so a fetch finds an entry without asking the store.

Layout (little-endian): a 128-byte header (magic, word bytes, words, entries indexed, first
entry id, the spec's fingerprint), the words, zero padding to 8 bytes, then ``entries + 1``
``uint64`` starts: entry ``first + i`` is words ``start[i] .. start[i + 1]`` (bit 63 masked off;
none for an entry that does not train). Bit 63 says the entry has more than words and the
supervised bit (a preference pair's split, unusual loss weights, an ``extra_info``), which
``entry_renders`` holds.

The file is named by the spec's fingerprint (plus a random part where another store's file has
that name) and lives in the store's token folder (``<store>.tokens`` beside a store file). It is
written under a hidden temporary name, synced, and renamed into place only when complete, so a
full disk, a crash or Ctrl-C leaves no file that looks finished; it is never rewritten in place
(a reader that mapped it keeps the file it mapped). Opening takes regular files only and checks
the header, the size and the index's two ends against the store's record, which costs nothing
at any size; a fetch checks that its entries' words lie within; ``dataidx verify --tokens``
checks the sha256 of everything after the header.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import StaleStoreError, StoreError
from ..store import Specs
from .digests import sha256_of

MAGIC = b"DIDXTOK2"
#: magic, word bytes, reserved, words, entries indexed, first entry id, the spec's fingerprint (raw)
HEADER = struct.Struct("<8sII QQQ 32s 56x")
assert HEADER.size == 128
#: Bit 63 of an index start: the entry has a pair's split, unusual weights or an ``extra_info`` (``entry_renders``).
EXTRAS = np.uint64(1 << 63)
START = np.uint64((1 << 63) - 1)
_START = int(START)


def token_file_name(fingerprint: str) -> str:
    """The name of a spec's token file: its fingerprint, so another rendering never shares it."""
    return f"{fingerprint}.tokens"


def index_offset(words: int, word_bytes: int) -> int:
    """Where the index starts: after the header and the words, at a multiple of 8 bytes."""
    return -(-(HEADER.size + words * word_bytes) // 8) * 8


def file_size(words: int, word_bytes: int, entries: int) -> int:
    return index_offset(words, word_bytes) + (entries + 1) * 8


class TokenFileWriter:
    """Appends words (and index starts, to a second temporary file) and publishes one file under
    its name when complete.

    Example::

        with TokenFileWriter(folder, fingerprint, np.dtype("<u2")) as writer:
            offset = writer.append(words)
            writer.index(starts)
            writer.publish(first_entry)
    """

    def __init__(self, folder: Path, fingerprint: str, dtype: np.dtype, name: str | None = None) -> None:
        self.folder, self.fingerprint, self.dtype = folder, fingerprint, dtype
        #: the folders this writer makes, deepest first: removed again if it publishes nothing
        self.made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
        self.published = False
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{folder}: cannot make the token folder: {exc.strerror or exc}") from None
        self.path = folder / (name or token_file_name(fingerprint))
        self.temporary = folder / f".{self.path.name}.{os.getpid()}.tmp"
        self.index_temporary = folder / f".{self.path.name}.{os.getpid()}.index.tmp"
        self.file = open(self.temporary, "wb")
        self.index_file = open(self.index_temporary, "w+b")
        self.file.write(bytes(HEADER.size))
        self.file.flush()  # render workers fork after this: none inherits bytes waiting in the buffer
        self.words = self.entries = 0
        self.digest = hashlib.sha256()

    def __enter__(self) -> TokenFileWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Whatever happened, no temporary file stays behind, nor a folder made for a file that
        was never published (a render stopped by Ctrl-C leaves no empty ``.tokens``)."""
        self.file.close()
        self.index_file.close()
        self.temporary.unlink(missing_ok=True)
        self.index_temporary.unlink(missing_ok=True)
        if not self.published:
            for folder in self.made:
                try:
                    folder.rmdir()  # only if empty: another writer may have put its file there meanwhile
                except OSError:
                    break

    def append(self, words: np.ndarray) -> int:
        """Write ``words``; returns the offset (in words) of the first."""
        data = np.ascontiguousarray(words, dtype=self.dtype).tobytes()
        self._write(self.file, data, self.temporary)
        self.digest.update(data)
        offset, self.words = self.words, self.words + len(words)
        return offset

    def index(self, starts: np.ndarray) -> None:
        """Write the index starts of the next base entries (each with :data:`EXTRAS` where it applies)."""
        self._write(self.index_file, np.ascontiguousarray(starts, dtype="<u8").tobytes(), self.index_temporary)
        self.entries += len(starts)

    @staticmethod
    def _write(file: Any, data: bytes, path: Path) -> None:
        try:
            file.write(data)
        except OSError as exc:
            raise StoreError(f"{path}: cannot write tokens: {exc.strerror or exc}") from None

    @property
    def bytes(self) -> int:
        return file_size(self.words, self.dtype.itemsize, self.entries)

    def publish(self, first_entry: int, name: str | None = None) -> None:
        """Append the index (its end included), write the header, sync, and rename into place,
        under ``name`` (default: the fingerprint's, :func:`token_file_name`)."""
        if name is not None:
            self.path = self.folder / name
        try:
            padding = index_offset(self.words, self.dtype.itemsize) - HEADER.size - self.words * self.dtype.itemsize
            tail = bytes(padding)
            self.file.write(tail)
            self.digest.update(tail)
            self.index_file.write(np.array([self.words], dtype="<u8").tobytes())
            self.index_file.seek(0)
            while block := self.index_file.read(1 << 22):
                self.file.write(block)
                self.digest.update(block)
            self.file.seek(0)
            self.file.write(HEADER.pack(MAGIC, self.dtype.itemsize, 0, self.words, self.entries, first_entry,
                                        bytes.fromhex(self.fingerprint)))
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temporary, self.path)
            self.published = True
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
        self.entries = self.first_entry = 0
        self._mapped: tuple[int, np.ndarray, np.ndarray] | None = None
        self._fix = f"run dataidx render --store-tokens again for spec '{spec}'"
        with self._opened() as file:
            self._check(file)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_mapped": None}

    def _opened(self) -> BinaryIO:
        """The file, opened for reading if it is a regular file: a FIFO or a device named in its
        place would make a reader wait, or read, forever (it is opened without waiting, then
        refused)."""
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise StaleStoreError(f"{self.path}: the token file of spec '{self.spec}' is missing (a store moved "
                                  f"without its .tokens folder?); move it beside the store, or {self._fix}") from None
        except OSError as exc:
            raise StaleStoreError(f"{self.path}: cannot read the token file of spec '{self.spec}': "
                                  f"{exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise StaleStoreError(f"{self.path}: the token file of spec '{self.spec}' is not a regular file; "
                                      f"{self._fix}")
            os.set_blocking(descriptor, True)
            return os.fdopen(descriptor, "rb")
        except BaseException:
            os.close(descriptor)
            raise

    def _check(self, file: BinaryIO) -> None:
        """One line naming what is wrong, if the file is not the one the store recorded: its header
        and size, and its index's ends (two reads of 8 bytes; a fetch checks its own entries)."""
        fix = self._fix
        try:
            header = file.read(HEADER.size)
            size = os.fstat(file.fileno()).st_size
        except OSError as exc:
            raise StaleStoreError(f"{self.path}: cannot read the token file of spec '{self.spec}': "
                                  f"{exc.strerror or exc}") from None
        if len(header) < HEADER.size or header[:8] != MAGIC:
            raise StaleStoreError(f"{self.path}: not a dataidx token file (of this version); {fix}")
        _, word_bytes, _, words, entries, first_entry, fingerprint = HEADER.unpack(header)
        if fingerprint.hex() != self.fingerprint:
            raise StaleStoreError(f"{self.path}: holds the tokens of another rendering (fingerprint "
                                  f"{fingerprint.hex()[:12]}, spec '{self.spec}' is {self.fingerprint[:12]}); {fix}")
        expected = file_size(self.words, self.word_bytes, entries)
        if (word_bytes, words) != (self.word_bytes, self.words) or size != expected:
            raise StaleStoreError(f"{self.path}: {size} bytes, but spec '{self.spec}' recorded {expected} "
                                  f"({self.words} words of {self.word_bytes} bytes): truncated or edited; {fix}")
        file.seek(index_offset(words, word_bytes))
        first = int(np.frombuffer(file.read(8), dtype="<u8")[0])
        file.seek(size - 8)
        last = int(np.frombuffer(file.read(8), dtype="<u8")[0])
        if first & _START != 0 or last != words:
            raise StaleStoreError(f"{self.path}: token file damaged: its index runs from word {first & _START} to "
                                  f"{last}, not 0 to its {words} words; {fix}")
        self.entries, self.first_entry = entries, first_entry

    def damaged(self, entry_id: int, start: int, end: int) -> StaleStoreError:
        """The error of an entry whose index places it outside the words, or before itself."""
        return StaleStoreError(f"{self.path}: token file damaged: its index places base entry {entry_id} at words "
                               f"{start}..{end} of {self.words}; {self._fix}")

    def mapped(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``(pid, words, index)``: the file mapped in this process (a worker maps it again)."""
        mapped = self._mapped
        if mapped is None or mapped[0] != os.getpid():
            # A worker maps what its parent checked: the file may have gone since; the map is made
            # from the file checked, not from its name again.
            with self._opened() as file:
                self._check(file)
                whole = np.memmap(file, dtype=np.uint8, mode="r")
            dtype = np.dtype("<u2") if self.word_bytes == 2 else np.dtype("<u4")
            # Plain views of one map: a memmap's own slices each run Python (__array_finalize__).
            words = np.asarray(whole[HEADER.size: HEADER.size + self.words * self.word_bytes]).view(dtype)
            start = index_offset(self.words, self.word_bytes)
            index = np.asarray(whole[start: start + (self.entries + 1) * 8]).view("<u8")
            mapped = self._mapped = (os.getpid(), words, index)
        return mapped

    @property
    def words_array(self) -> np.ndarray:
        """The file's words, memory-mapped (read-only) in this process."""
        return self.mapped()[1]

    @property
    def index_array(self) -> np.ndarray:
        """Where each base entry's words start (``entries + 1`` of them, bit 63 the extras flag)."""
        return self.mapped()[2]

    def lengths(self) -> Specs.Lengths:
        """Every indexed entry's tokens and whether it trains (it has words), from the index alone:
        what ``spec_lengths`` reads from the store with an O(entries) query, at memory speed."""
        _, _, index = self.mapped()
        counts = np.diff((index & START).astype(np.int64))
        if counts.size and counts.min() < 0:  # the ends are checked on open: a count under 0 is the only edit left
            at = int(np.argmax(counts < 0))
            raise self.damaged(self.first_entry + at, int(index[at] & START), int(index[at + 1] & START))
        return Specs.Lengths(self.first_entry, counts.astype(np.int32), counts > 0)

    def trains(self, entry_ids: np.ndarray) -> np.ndarray:
        """Whether each of base entries ``entry_ids`` trains under the spec (it has words), from the
        index alone: a reader finds a mixture's training positions without reading the store's
        lengths (an O(entries) query)."""
        _, _, index = self.mapped()
        at = np.asarray(entry_ids, dtype=np.int64) - self.first_entry
        if at.size and (at.min() < 0 or at.max() >= self.entries):
            last = self.first_entry + self.entries - 1
            raise StaleStoreError(f"{self.path}: indexes entries {self.first_entry}..{last}, but a mixture serves "
                                  f"others; run dataidx render --store-tokens again for spec '{self.spec}'")
        starts, ends = index[at] & START, index[at + 1] & START
        outside = (ends < starts) | (ends > self.words)  # an edit would change which entries train, in silence
        if outside.any():
            k = int(np.argmax(outside))
            raise self.damaged(int(entry_ids[k]), int(starts[k]), int(ends[k]))
        return ends > starts

    def sha256(self) -> str:
        """sha256 of everything after the header (words, padding, index), read in blocks."""
        with self._opened() as file:
            file.seek(HEADER.size)
            return sha256_of(file)


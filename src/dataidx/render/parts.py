"""The files of a sharded render: one part per shard and its manifest, written after the part.

A shard's part holds what a render pass returned for each of its ranges, as ``dataidx render``
would keep it, in two files: ``NAME.rows.db``, its rows in ``entry_renders``' columns with the
summaries a spec's write counts from them (a small SQLite file, :mod:`dataidx.store.specs.part_rows`:
the merge copies its rows with SQLite's own ``INSERT ... SELECT``, no Python object per row), and
with ``--store-tokens`` ``NAME.tokens``, a token file of its own (its words and their index, the
layout of :mod:`.token_file`), which the merge appends to the spec's. Then ``NAME.json``, the
manifest: the shard's entry range, the spec's fingerprint, the build's digest, the request, and
each file's size and sha256. The manifest is written last, through a temporary file and a
rename, so a part without one is unfinished (a worker killed mid-part) and is rendered again; a
part with one is checked against it before it is used. The protocol is datatrove's completions
and dolma's ``*.done.txt``; what it adds is the check, in ``dataidx merge``, that the parts are
exactly a serial render's.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RenderError, StoreError
from ..store import Specs
from .digests import sha256_of
from .passes import RangeRendered
from .spool import stored_rows
from .token_file import EXTRAS, HEADER, MAGIC, START, TokenFileWriter, file_size, index_offset
from .token_pass import WordPlacer

#: What a manifest says it is (a later layout gets another).
FORMAT = "dataidx-render-part/2"
#: Words a merge copies from a part's token file at a time (16M: 32-64 MB).
_WORDS_PER_COPY = 1 << 24
#: A manifest is a few hundred bytes: anything past this is not one.
MAX_MANIFEST_BYTES = 1 << 20


def part_name(shard: int, shards: int) -> str:
    return f"shard-{shard:05d}-of-{shards:05d}"


@dataclass(frozen=True)
class Manifest:
    """What a finished part says of itself."""

    path: Path
    shard: int
    shards: int
    first: int
    last: int
    fingerprint: str
    build: str
    version: str
    request: dict[str, Any]
    dtype: str | None
    files: dict[str, dict[str, Any]]

    @property
    def folder(self) -> Path:
        return self.path.parent

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "shard": self.shard, "shards": self.shards, "first": self.first, "last": self.last,
                "fingerprint": self.fingerprint, "build": self.build, "version": self.version,
                "request": self.request, "dtype": self.dtype, "files": self.files}


class PartWriter:
    """Writes one shard's part: ranges as they come, then, once complete, its manifest."""

    def __init__(self, folder: Path, shard: int, shards: int, *, fingerprint: str, dtype: np.dtype | None,
                 datasets: list[tuple[int, int, int]]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.name, self.datasets = folder, part_name(shard, shards), datasets
        self.temporary = folder / f".{self.name}.rows.db.{os.getpid()}.tmp"
        self.temporary.unlink(missing_ok=True)
        self.rows = Specs.part_writer(self.temporary)
        self.words = (WordPlacer(TokenFileWriter(folder, fingerprint, dtype, f"{self.name}.tokens"))
                      if dtype is not None else None)

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.rows.close()
        self.temporary.unlink(missing_ok=True)
        if self.words is not None:
            self.words.writer.__exit__(*exc_info)

    def add(self, rendered: RangeRendered) -> None:
        """One range's rows, uses and words."""
        placed = None
        if self.words is not None:
            placed = self.words.place(rendered.tokens, [row[0] for row in rendered.rows])
        self.rows.add(stored_rows(rendered.rows, placed), rendered.uses)

    def finish(self, manifest: dict[str, Any]) -> Manifest:
        """Count the part's summaries, make its files durable under their names, then write its
        manifest (last)."""
        self.rows.finish(self.datasets)
        _sync(self.temporary)
        names = {"rows": f"{self.name}.rows.db"}
        os.replace(self.temporary, self.folder / names["rows"])
        if self.words is not None:
            names["tokens"] = f"{self.name}.tokens"
            self.words.writer.publish(manifest["first"])
        files = {kind: {"name": name, "bytes": (self.folder / name).stat().st_size,
                        "sha256": _sha256(self.folder / name)} for kind, name in names.items()}
        dtype = self.words.dtype.str if self.words is not None else None
        record = Manifest(path=self.folder / f"{self.name}.json", files=files, dtype=dtype, **manifest)
        temporary = self.folder / f".{self.name}.json.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(record.as_json(), handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, record.path)
        return record


def read_manifest(path: Path) -> Manifest:
    """A part's manifest, or a one-line RenderError naming the file."""
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise RenderError(f"{path}: {size:,} bytes, not a part's manifest (at most {MAX_MANIFEST_BYTES:,})")
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RenderError(f"{path}: not a part's manifest ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        raise RenderError(f"{path}: not a dataidx render part's manifest (format {FORMAT})")
    try:
        manifest = Manifest(path=path, **{key: found[key] for key in (
            "shard", "shards", "first", "last", "fingerprint", "build", "version", "request", "dtype", "files")})
    except KeyError as exc:
        raise RenderError(f"{path}: its manifest has no {exc.args[0]!r}") from None
    numbers = (manifest.shard, manifest.shards, manifest.first, manifest.last)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or not (
            0 <= manifest.shard < manifest.shards and manifest.first <= manifest.last + 1):
        raise RenderError(f"{path}: its shard, shards or entry range are not numbers that make a shard")
    if not isinstance(manifest.files, dict) or "rows" not in manifest.files:
        raise RenderError(f"{path}: its manifest names no rows file")
    return manifest


def check_files(manifest: Manifest) -> None:
    """Each file of a part is there, of the size and sha256 its manifest says (read once, in blocks)."""
    for kind, record in manifest.files.items():
        if not isinstance(record, dict) or not isinstance(record.get("name"), str) or "/" in record["name"]:
            raise RenderError(f"{manifest.path}: its {kind} file is not named as a part's is")
        path = manifest.folder / record["name"]
        try:
            size = path.stat().st_size
        except OSError:
            raise RenderError(f"{path}: missing; its manifest {manifest.path.name} names it") from None
        if size != record.get("bytes"):
            raise RenderError(f"{path}: {size:,} bytes where its manifest says {record.get('bytes')!r}: truncated or "
                              "rewritten; render the shard again")
        if _sha256(path) != record.get("sha256"):
            raise RenderError(f"{path}: its sha256 is not the one its manifest says: changed since it was written; "
                              "render the shard again")


def part_files(manifests: list[Manifest]) -> tuple[list[Path], list[Path | None]]:
    """Each part's rows file, and its token file (None without one), in shard order."""
    rows = [manifest.folder / manifest.files["rows"]["name"] for manifest in manifests]
    tokens = [manifest.folder / manifest.files["tokens"]["name"] if "tokens" in manifest.files else None
              for manifest in manifests]
    return rows, tokens


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return sha256_of(handle)


def _sync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def append_part_words(placer: WordPlacer, path: Path, first: int, last: int) -> tuple[int, int]:
    """Append a shard's token file to the spec's (its words, then its index moved past the words
    so far), which indexes base entries ``first..last``; returns where its words start there and
    how many it holds (its rows' offsets are its own). Its entries are counted by the caller."""
    header, words, starts = read_part_words(path, placer.dtype, first, last, placer.writer.fingerprint)
    base = placer.writer.words
    for at in range(0, words, _WORDS_PER_COPY):
        placer.writer.append(np.fromfile(path, dtype=placer.dtype, count=min(_WORDS_PER_COPY, words - at),
                                         offset=header + at * placer.dtype.itemsize))
    placer.writer.index((starts & START) + np.uint64(base) | (starts & EXTRAS))
    if placer.first_entry is None:
        placer.first_entry = first
    placer.next_entry = last + 1
    return base, words


def read_part_words(path: Path, dtype: np.dtype, first: int, last: int, fingerprint: str
                    ) -> tuple[int, int, np.ndarray]:
    """A shard's token file (:mod:`.parts`), checked to be one of spec ``fingerprint``'s words
    indexing base entries ``first..last``: ``(where its words start, how many, each entry's
    start)``, the starts increasing within the words (bit 63 aside), as a merge appends them."""
    entries = last - first + 1
    try:
        with open(path, "rb") as file:
            head = file.read(HEADER.size)
        magic, word_bytes, _, words, indexed, first_entry, raw = HEADER.unpack(head)
        size = os.stat(path).st_size
    except (OSError, struct.error) as exc:
        raise StoreError(f"{path}: not a part's token file ({exc})") from None
    wanted = (MAGIC, dtype.itemsize, entries, first, bytes.fromhex(fingerprint))
    if (magic, word_bytes, indexed, first_entry, raw) != wanted:
        raise StoreError(f"{path}: not the token file of base entries {first}..{last} under this spec's fingerprint")
    if size != file_size(words, word_bytes, entries):
        raise StoreError(f"{path}: {size:,} bytes, and its header says {file_size(words, word_bytes, entries):,}")
    starts = np.fromfile(path, dtype="<u8", count=entries + 1, offset=index_offset(words, word_bytes))
    plain = starts & START
    if len(starts) != entries + 1 or plain[-1] != words or (np.diff(plain.astype(np.int64)) < 0).any():
        raise StoreError(f"{path}: its index does not step through its {words:,} words")
    return HEADER.size, words, starts[:-1]

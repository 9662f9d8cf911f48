"""The files of a sharded render: one part per shard and its manifest, written after the part.

A shard's part holds what a render pass returned for each of its ranges, in order, as
``dataidx render`` would keep it: rows (lengths, statuses, causes, reasoning), plain added-token
uses, and with ``--store-tokens`` each entry's words. Two files: ``NAME.rows.jsonl`` (a chunk a
line, JSON: no pickle, since parts may come from shared storage) and ``NAME.words`` (the words,
raw), then ``NAME.json``, the manifest: the shard's entry range, the spec's fingerprint, the
build's digest, the request, and each file's size and sha256. The manifest is written last,
through a temporary file and a rename, so a part without one is unfinished (a worker killed
mid-part) and is rendered again; a part with one is checked against it before it is used.
The protocol is datatrove's completions and dolma's ``*.done.txt``; what it adds is the check,
in ``dataidx merge``, that the parts are exactly a serial render's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RenderError
from ..store import Specs
from .passes import RangeRendered

#: What a manifest says it is (a later layout gets another).
FORMAT = "dataidx-render-part/1"
#: A manifest is a few hundred bytes: anything past this is not one.
MAX_MANIFEST_BYTES = 1 << 20
#: A part's line is one chunk's rows: past this it is not one dataidx wrote.
MAX_LINE_BYTES = 1 << 30


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
    """Writes one shard's part: chunks as they come, then, once complete, its manifest."""

    def __init__(self, folder: Path, shard: int, shards: int, dtype: np.dtype | None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.name, self.dtype = folder, part_name(shard, shards), dtype
        self.temporary = {kind: folder / f".{self.name}.{kind}.{os.getpid()}.tmp" for kind in ("rows", "words")}
        self.rows = open(self.temporary["rows"], "wb")
        self.words = open(self.temporary["words"], "wb") if dtype is not None else None
        self.digests = {"rows": hashlib.sha256(), "words": hashlib.sha256()}

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for handle in (self.rows, self.words):
            if handle is not None:
                handle.close()
        for path in self.temporary.values():
            path.unlink(missing_ok=True)

    def add(self, rendered: RangeRendered) -> None:
        """One range's rows, uses and words."""
        tokens = None
        if rendered.tokens is not None:
            assert self.words is not None and self.dtype is not None  # words only when the part stores tokens
            words, entries = rendered.tokens
            data = np.ascontiguousarray(words, dtype=self.dtype).tobytes()
            self.words.write(data)
            self.digests["words"].update(data)
            tokens = {"words": len(words), "entries": [[entry, count, side, _text(weights), info]
                                                       for entry, count, side, weights, info in entries]}
        line = json.dumps({"rows": rendered.rows, "uses": [[dataset, token, n] for (dataset, token), n
                                                           in sorted(rendered.uses.items())],
                           "tokens": tokens}, separators=(",", ":")).encode() + b"\n"
        self.rows.write(line)
        self.digests["rows"].update(line)

    def finish(self, manifest: dict[str, Any]) -> Manifest:
        """Make the part's files durable under their names, then write its manifest (last)."""
        files: dict[str, dict[str, Any]] = {}
        for kind, handle in (("rows", self.rows), ("words", self.words)):
            if handle is None:
                continue
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            name = f"{self.name}.{kind}" + (".jsonl" if kind == "rows" else "")
            os.replace(self.temporary[kind], self.folder / name)
            files[kind] = {"name": name, "bytes": (self.folder / name).stat().st_size,
                           "sha256": self.digests[kind].hexdigest()}
        record = Manifest(path=self.folder / f"{self.name}.json", files=files, dtype=_dtype_name(self.dtype),
                          **manifest)
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
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() != record.get("sha256"):
            raise RenderError(f"{path}: its sha256 is not the one its manifest says: changed since it was written; "
                              "render the shard again")


def read_part(manifest: Manifest) -> Iterator[RangeRendered]:
    """The part's ranges as a render pass returned them, checked to be its entries in id order."""
    words_file = manifest.files.get("words")
    dtype = np.dtype(manifest.dtype) if manifest.dtype is not None else None
    expected, offset = manifest.first, 0
    with open(manifest.folder / manifest.files["rows"]["name"], "rb") as rows:
        for number, line in enumerate(iter(lambda: rows.readline(MAX_LINE_BYTES), b""), 1):
            where = f"{manifest.folder / manifest.files['rows']['name']} line {number}"
            try:
                chunk = json.loads(line)
                found = [_row(row) for row in chunk["rows"]]
                uses: Counter[tuple[int, str]] = Counter({(int(dataset), str(token)): int(n)
                                                          for dataset, token, n in chunk["uses"]})
            except (ValueError, TypeError, KeyError) as exc:
                raise RenderError(f"{where}: not a chunk of rendered rows ({type(exc).__name__})") from None
            ids = [row[0] for row in found]
            if ids != list(range(expected, expected + len(ids))):
                raise RenderError(f"{where}: its rows are not base entries {expected}.. in order")
            expected += len(ids)
            tokens = None
            if chunk.get("tokens") is not None:
                if dtype is None or words_file is None:
                    raise RenderError(f"{where}: holds words, and its manifest names no words file")
                count = int(chunk["tokens"]["words"])
                words = np.fromfile(manifest.folder / words_file["name"], dtype=dtype, count=count,
                                    offset=offset * dtype.itemsize)
                if len(words) != count:
                    raise RenderError(f"{where}: its words run past the words file")
                offset += count
                tokens = (words, [(int(entry), int(size), side, _bytes(weights), info)
                                  for entry, size, side, weights, info in chunk["tokens"]["entries"]])
            yield RangeRendered(found, uses, tokens)
    if expected != manifest.last + 1:
        raise RenderError(f"{manifest.path}: its part holds base entries {manifest.first}..{expected - 1}, its "
                          f"manifest says ..{manifest.last}: truncated; render the shard again")


def _row(row: list[Any]) -> Specs.LengthRow:
    """A stored row from its JSON, its fields of the types a render writes."""
    entry, tokens, supervised, full, status, detail, cause, reasoning = row
    if status not in Specs.STATUSES:
        raise ValueError(f"status {status!r}")
    for text in (detail, cause, reasoning):
        if text is not None and not isinstance(text, str):
            raise TypeError("a text field")
    return (int(entry), int(tokens), int(supervised), int(full), status, detail, cause, reasoning)


def _text(weights: bytes | None) -> str | None:
    return base64.b64encode(weights).decode() if weights is not None else None


def _bytes(weights: str | None) -> bytes | None:
    return base64.b64decode(weights) if weights is not None else None


def _dtype_name(dtype: np.dtype | None) -> str | None:
    return dtype.str if dtype is not None else None

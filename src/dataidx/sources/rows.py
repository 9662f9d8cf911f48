"""Read raw rows of a loaded dataset straight from its Arrow files, without ``load_dataset``.

At build time we remember the memory-mapped Arrow cache files a ``datasets.Dataset`` reads from;
opening a store maps those files again, which costs milliseconds instead of a reload. When a
dataset is not a plain concatenation of such files (a sliced split, an in-memory dataset), the
store records none and readers fall back to loading the source again.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from .arrow_json import Decoder, decode_json, decoded_json, json_decoders

if TYPE_CHECKING:
    from datasets import Dataset


#: What reading a damaged row raises: invalid UTF-8, or arrays pyarrow's JSON reader built
#: inconsistently (seen for null structs inside lists).
UNREADABLE = (UnicodeDecodeError, SystemError, pa.ArrowException)


@dataclass(frozen=True)
class BadRow:
    """Stands in for a row whose bytes cannot be decoded (invalid UTF-8), with the reason."""

    reason: str


class RowSource(Protocol):
    """Random and sequential access to a dataset's raw rows as Python dicts."""

    def __len__(self) -> int: ...

    def row(self, index: int) -> dict[str, Any]: ...

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]: ...

    def table(self) -> pa.Table | None: ...

    @property
    def column_names(self) -> list[str]: ...


class ArrowRows:
    """Rows of Arrow stream files, memory-mapped and decoded one record batch at a time.

    ``files`` are the records :func:`arrow_files_of` made at build time: each lists where its
    record batches start (byte offset, row count), so opening maps the files and reads nothing
    else, whatever their size; a batch is decoded, zero-copy, the first time a row needs it.
    """

    def __init__(self, files: Sequence[dict[str, Any]]) -> None:
        self.files = list(files)
        # Whole-file zero-copy buffers: reading a batch slices one, no shared file position to race on.
        self._buffers = [_mapped_buffer(f["path"]) for f in self.files]
        self._layout: list[tuple[int, int]] = []  # (file index, byte offset) per batch
        self._starts: list[int] = []
        total = 0
        for number, entry in enumerate(self.files):
            for offset, rows in entry.get("batches") or batch_layout(entry["path"]):
                self._layout.append((number, offset))
                self._starts.append(total)
                total += rows
        self._length = total
        self._schemas: dict[int, pa.Schema] = {}
        # Per batch, not per row: a scalar per column is faster than slicing a one-row batch.
        self._columns: dict[int, list[tuple[str, pa.Array]]] = {}
        self._json = json_decoders(self._schema(0)) if self._buffers else {}

    def __len__(self) -> int:
        return self._length

    @property
    def column_names(self) -> list[str]:
        return self._schema(0).names if self._buffers else []

    def _schema(self, file_number: int) -> pa.Schema:
        schema = self._schemas.get(file_number)
        if schema is None:
            schema = self._schemas[file_number] = pa.ipc.read_schema(pa.ipc.read_message(self._buffers[file_number]))
        return schema

    def _batch(self, number: int) -> pa.RecordBatch:
        file_number, offset = self._layout[number]
        message = pa.ipc.read_message(self._buffers[file_number].slice(offset))
        return pa.ipc.read_record_batch(message, self._schema(file_number))

    def row(self, index: int) -> dict[str, Any]:
        number = bisect.bisect_right(self._starts, index) - 1
        columns = self._columns.get(number)
        if columns is None:
            batch = self._batch(number)
            columns = self._columns[number] = list(zip(batch.schema.names, batch.columns))
        local = index - self._starts[number]
        row = {name: column[local].as_py() for name, column in columns}
        return decode_json(row, self._json) if self._json else row

    def batches(self) -> Iterator[pa.RecordBatch]:
        for number in range(len(self._layout)):
            yield self._batch(number)

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for batch in self.batches():
            try:
                rows = batch.to_pylist()
            except UNREADABLE:
                rows = [_decoded(batch.slice(j, 1)) for j in range(batch.num_rows)]
            if self._json:
                rows = [row if isinstance(row, BadRow) else _parsed(row, self._json) for row in rows]
            yield from rows

    def table(self) -> pa.Table | None:
        """All rows as one zero-copy Arrow table, for vectorised passes."""
        if not self._buffers:
            return None
        return pa.Table.from_batches(list(self.batches()), schema=self._schema(0))


def _mapped_buffer(path: str) -> pa.Buffer:
    with pa.memory_map(path, "r") as source:
        return source.read_buffer()  # stays valid (and mapped) after the file object closes


def batch_layout(path: str) -> list[tuple[int, int]]:
    """``(byte offset, rows)`` of every non-empty record batch of an Arrow stream file."""
    layout = []
    with pa.memory_map(path, "r") as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        schema = None
        while True:
            offset = source.tell()
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if message is None:
                break
            if message.type == "schema":
                schema = pa.ipc.read_schema(message)
            elif message.type == "record batch":
                rows = pa.ipc.read_record_batch(message, schema).num_rows
                if rows:
                    layout.append((offset, rows))
            else:
                raise ValueError(f"{path}: unexpected Arrow message '{message.type}'")
    return layout


class DatasetRows:
    """Rows of a ``datasets.Dataset`` through its own indexing: the slow, general fallback."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def row(self, index: int) -> dict[str, Any]:
        return self.dataset[index]

    @property
    def column_names(self) -> list[str]:
        return list(self.dataset.column_names)

    def table(self) -> pa.Table | None:
        return None  # rows go through an indices mapping: only the row path is exact

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for start in range(0, len(self.dataset), 1000):
            try:
                batch = self.dataset[start : start + 1000]
            except UNREADABLE:
                yield from (_decoded_row(self.dataset, i) for i in range(start, min(start + 1000, len(self.dataset))))
                continue
            columns = list(batch)
            for values in zip(*(batch[c] for c in columns)):
                yield dict(zip(columns, values))


def _parsed(row: dict[str, Any], decoders: dict[str, Decoder]) -> dict[str, Any] | BadRow:
    parsed = decoded_json(row, decoders)
    return BadRow("a JSON value in the row cannot be parsed") if parsed is None else parsed


def _decoded(one_row: pa.RecordBatch) -> dict[str, Any] | BadRow:
    try:
        return one_row.to_pylist()[0]
    except UnicodeDecodeError as exc:
        columns = [name for name, column in zip(one_row.schema.names, one_row.columns) if not _decodes(column)]
        return BadRow(f"column {', '.join(repr(c) for c in columns) or '?'} is not valid UTF-8 ({exc.reason})")
    except UNREADABLE as exc:
        return BadRow(f"the row cannot be read back from its Arrow data ({type(exc).__name__}: {exc})")


def _decoded_row(dataset: Dataset, index: int) -> dict[str, Any] | BadRow:
    try:
        return dataset[index]
    except UNREADABLE as exc:
        return BadRow(f"the row cannot be read ({type(exc).__name__}: {exc})")


def _decodes(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UNREADABLE:
        return False
    return True


def arrow_files_of(dataset: Dataset) -> list[dict[str, Any]] | None:
    """The Arrow files that hold exactly ``dataset``'s rows in order, with their batch layout,
    or None if there are none (then readers load the source again)."""
    if getattr(dataset, "_indices", None) is not None:
        return None
    paths = [entry["filename"] for entry in dataset.cache_files]
    if not paths:
        return None
    files = []
    for path in paths:
        layout = batch_layout(path)
        stat = os.stat(path)
        files.append({"path": path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                      "rows": sum(r for _, r in layout), "batches": layout})
    if sum(f["rows"] for f in files) != len(dataset):
        return None
    return files


def arrow_files_state(files: Sequence[dict[str, Any]]) -> str:
    """``"intact"``, ``"missing"`` (a cleaned cache: load the source again) or ``"changed"``
    (the cache was written anew since the build: its rows may no longer match the index)."""
    for entry in files:
        try:
            stat = os.stat(entry["path"])
        except OSError:
            return "missing"
        if stat.st_size != entry["size"] or stat.st_mtime_ns != entry.get("mtime_ns", stat.st_mtime_ns):
            return "changed"
    return "intact"

"""Read raw rows of a loaded dataset straight from its Arrow files, without ``load_dataset``.

At build time we remember the memory-mapped Arrow cache files a ``datasets.Dataset`` reads from;
opening a store maps those files again, which costs milliseconds instead of a reload. When a
dataset is not a plain concatenation of such files (a sliced split, an in-memory dataset), the
store records none and readers fall back to loading the source again.
"""

from __future__ import annotations

import bisect
import gc
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from .arrow_cells import MappedCells
from .arrow_files import batch_layout
from .arrow_json import Decoder, decode_json, decoded_json, json_decoders


@contextmanager
def paused_gc() -> Iterator[None]:
    """No collection inside the block, for a step that allocates only acyclic objects (a batch of
    rows read and converted, the nodes of a parsed config): a collection in the middle of it is
    pure cost. The collector runs as before after it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


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

    def chunks(self, rows: int, nbytes: int) -> Iterator[RowChunk]: ...

    def take(self, indices: Sequence[int]) -> pa.Table | None: ...

    def release(self) -> None: ...

    @property
    def column_names(self) -> list[str]: ...


@dataclass(frozen=True)
class RowChunk:
    """Consecutive rows of a dataset, read into memory: the unit a build converts and writes.

    ``table`` holds the raw columns for vectorised passes (None when the source has no Arrow
    data); ``rows()`` gives the same rows as dicts, as ``iter_rows`` would.
    """

    first: int
    length: int
    table: pa.Table | None
    rows: Callable[[], Iterator[dict[str, Any] | BadRow]]


class ArrowRows:
    """Rows of Arrow stream files, memory-mapped and decoded one record batch at a time.

    ``files`` are the records :func:`arrow_files_of` made at build time: each lists where its
    record batches start (byte offset, row count), so opening maps the files and reads nothing
    else, whatever their size; a batch is decoded, zero-copy, the first time a row needs it.
    """

    def __init__(self, files: Sequence[dict[str, Any]]) -> None:
        self.files = list(files)
        # Whole-file zero-copy buffers: reading a batch slices one, no shared file position to race on.
        maps = [_mapped(f["path"]) for f in self.files]
        self._maps = [mapped for mapped, _ in maps if mapped is not None]
        self._buffers = [buffer for _, buffer in maps]
        self._layout: list[tuple[int, int, int]] = []  # (file index, byte offset, batch of the file) per batch
        self._starts: list[int] = []
        counts: list[int] = []
        total = 0
        for number, entry in enumerate(self.files):
            layout = entry.get("batches") or batch_layout(entry["path"])
            for batch, (offset, rows) in enumerate(layout):
                self._layout.append((number, offset, batch))
                self._starts.append(total)
                total += rows
            counts.append(len(layout))
        self._length = total
        self._schemas: dict[int, pa.Schema] = {}
        # Per file, made on its first read; each batch is located once (see .arrow_cells), not
        # sliced per row: reading cells where they lie is faster than slicing a one-row batch.
        self._counts = counts
        self._cells: list[MappedCells | None] = [None] * len(self.files)
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
        file_number, offset, _ = self._layout[number]
        message = pa.ipc.read_message(self._buffers[file_number].slice(offset))
        return pa.ipc.read_record_batch(message, self._schema(file_number))

    def row(self, index: int) -> dict[str, Any]:
        number = bisect.bisect_right(self._starts, index) - 1
        file_number, _, batch = self._layout[number]
        cells = self._cells[file_number]
        if cells is None:
            cells = self._cells[file_number] = MappedCells(self._buffers[file_number], self._schema(file_number),
                                                           self._counts[file_number])
        if not cells.located(batch):
            cells.locate(batch, self._batch(number))
        row = cells.row(batch, index - self._starts[number])
        return decode_json(row, self._json) if self._json else row

    def release(self) -> None:
        """Let go of the pages read so far. A page of a map, once read, counts in the process's
        resident memory until it is unmapped or released: a pass over every row (export,
        render) would hold the whole files. Released pages are read again from the page cache
        when needed; the arrays batches keep are dropped with them."""
        for cells in self._cells:
            if cells is not None:
                cells.forget()
        for mapped in self._maps:
            mapped.madvise(mmap.MADV_DONTNEED)

    def batches(self) -> Iterator[pa.RecordBatch]:
        for number in range(len(self._layout)):
            yield self._batch(number)

    def take(self, indices: Sequence[int]) -> pa.Table:
        """Rows ``indices`` (ascending) as one table, taken from the mapped batches that hold them
        (zero-copy reads: a batch no row is in is not touched)."""
        taken: list[pa.RecordBatch] = []
        at = 0
        while at < len(indices):
            number = bisect.bisect_right(self._starts, indices[at]) - 1
            end = self._starts[number + 1] if number + 1 < len(self._starts) else self._length
            stop = bisect.bisect_left(indices, end, lo=at)
            local = [index - self._starts[number] for index in indices[at:stop]]
            taken.append(self._batch(number).take(pa.array(local, pa.int64())))
            at = stop
        return pa.Table.from_batches(taken, schema=self._schema(0))

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for batch in self.batches():
            yield from self._rows_of(batch)

    def _rows_of(self, batch: pa.RecordBatch) -> list[dict[str, Any] | BadRow]:
        try:
            rows = batch.to_pylist()
        except UNREADABLE:
            rows = [_decoded(batch.slice(j, 1)) for j in range(batch.num_rows)]
        if self._json:
            rows = [row if isinstance(row, BadRow) else _parsed(row, self._json) for row in rows]
        return rows

    def chunks(self, rows: int, nbytes: int) -> Iterator[RowChunk]:
        """The rows in chunks of up to ``rows`` rows, or fewer once they hold ``nbytes`` bytes.

        The files are read, not mapped: a mapped page that was read stays in the process's
        resident memory, so a pass over mapped files of 10 GB would hold 10 GB. A read chunk is
        freed once converted, and a build holds a chunk or two whatever the size of its sources.
        """
        batches: list[pa.RecordBatch] = []
        first = count = held = 0
        for batch in self._read_batches():
            offset = 0
            while offset < batch.num_rows:  # a batch longer than a chunk is sliced (zero-copy)
                piece = batch.slice(offset, rows - count)
                offset += piece.num_rows
                batches.append(piece)
                count += piece.num_rows
                held += piece.nbytes
                if count >= rows or held >= nbytes:
                    yield self._chunk(first, batches)
                    first += count
                    batches, count, held = [], 0, 0
        if batches:
            yield self._chunk(first, batches)

    def _read_batches(self) -> Iterator[pa.RecordBatch]:
        for entry in self.files:
            with pa.OSFile(entry["path"]) as source:
                yield from (batch for batch in pa.ipc.open_stream(source) if batch.num_rows)

    def _chunk(self, first: int, batches: list[pa.RecordBatch]) -> RowChunk:
        table = pa.Table.from_batches(batches, schema=self._schema(0))
        return RowChunk(first, table.num_rows, table,
                        lambda: (row for batch in batches for row in self._rows_of(batch)))


def _mapped(path: str) -> tuple[mmap.mmap | None, pa.Buffer]:
    """A read-only map of the file and a zero-copy Arrow buffer over it (an empty file: no map)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None, pa.py_buffer(b"")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)  # stays valid after the file closes
    return mapped, pa.py_buffer(mapped)


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


def _decodes(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UNREADABLE:
        return False
    return True

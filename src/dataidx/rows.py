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

if TYPE_CHECKING:
    from datasets import Dataset


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


class ArrowRows:
    """Rows of one or more Arrow stream files, memory-mapped; a row costs one batch slice."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self._batches: list[pa.RecordBatch] = []
        self.schema: pa.Schema | None = None
        for path in self.paths:
            with pa.memory_map(path, "r") as source:
                reader = pa.ipc.open_stream(source)
                self.schema = self.schema or reader.schema
                self._batches.extend(b for b in reader if b.num_rows)
        self._starts: list[int] = []
        total = 0
        for batch in self._batches:
            self._starts.append(total)
            total += batch.num_rows
        self._length = total
        # Per batch, not per row: a scalar per column is faster than slicing a one-row batch.
        self._columns = [list(zip(b.schema.names, b.columns)) for b in self._batches]

    def __len__(self) -> int:
        return self._length

    def row(self, index: int) -> dict[str, Any]:
        chunk = bisect.bisect_right(self._starts, index) - 1
        local = index - self._starts[chunk]
        return {name: column[local].as_py() for name, column in self._columns[chunk]}

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for batch in self._batches:
            try:
                yield from batch.to_pylist()
            except UnicodeDecodeError:
                yield from (_decoded(batch.slice(j, 1)) for j in range(batch.num_rows))

    def table(self) -> pa.Table | None:
        """All rows as one zero-copy Arrow table, for vectorised passes."""
        return pa.Table.from_batches(self._batches, schema=self.schema) if self.schema is not None else None


class DatasetRows:
    """Rows of a ``datasets.Dataset`` through its own indexing: the slow, general fallback."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def row(self, index: int) -> dict[str, Any]:
        return self.dataset[index]

    def table(self) -> pa.Table | None:
        return None  # rows go through an indices mapping: only the row path is exact

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for start in range(0, len(self.dataset), 1000):
            try:
                batch = self.dataset[start : start + 1000]
            except UnicodeDecodeError:
                yield from (_decoded_row(self.dataset, i) for i in range(start, min(start + 1000, len(self.dataset))))
                continue
            columns = list(batch)
            for values in zip(*(batch[c] for c in columns)):
                yield dict(zip(columns, values))


def _decoded(one_row: pa.RecordBatch) -> dict[str, Any] | BadRow:
    try:
        return one_row.to_pylist()[0]
    except UnicodeDecodeError as exc:
        columns = [name for name, column in zip(one_row.schema.names, one_row.columns) if not _decodes(column)]
        return BadRow(f"column {', '.join(repr(c) for c in columns) or '?'} is not valid UTF-8 ({exc.reason})")


def _decoded_row(dataset: Dataset, index: int) -> dict[str, Any] | BadRow:
    try:
        return dataset[index]
    except UnicodeDecodeError as exc:
        return BadRow(f"a column is not valid UTF-8 ({exc.reason})")


def _decodes(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return False
    return True


def arrow_files_of(dataset: Dataset) -> list[dict[str, Any]] | None:
    """The Arrow files that hold exactly ``dataset``'s rows in order, or None if there are none."""
    if getattr(dataset, "_indices", None) is not None:
        return None
    paths = [entry["filename"] for entry in dataset.cache_files]
    if not paths:
        return None
    files = []
    for path in paths:
        rows = len(ArrowRows([path]))
        files.append({"path": path, "size": os.path.getsize(path), "rows": rows})
    if sum(f["rows"] for f in files) != len(dataset):
        return None
    return files


def arrow_files_intact(files: Sequence[dict[str, Any]]) -> bool:
    """Cheap check that recorded Arrow files still exist with their recorded sizes."""
    for entry in files:
        try:
            if os.path.getsize(entry["path"]) != entry["size"]:
                return False
        except OSError:
            return False
    return True

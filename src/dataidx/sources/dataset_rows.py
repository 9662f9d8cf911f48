"""Rows of a ``datasets.Dataset`` read through its own indexing: the general fallback where a
dataset has no Arrow files of its own to map (:class:`.rows.ArrowRows`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .rows import UNREADABLE, BadRow, RowChunk

if TYPE_CHECKING:
    from datasets import Dataset


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

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        return self._rows_between(0, len(self.dataset))

    def release(self) -> None:
        """Nothing of dataidx's to let go of: ``datasets`` owns the dataset's maps."""

    def take(self, indices: Sequence[int]) -> None:
        """No table: rows are read through the dataset's own indexing (:meth:`row`)."""
        return None

    def chunks(self, rows: int, nbytes: int) -> Iterator[RowChunk]:
        """Rows ``rows`` at a time, with no table: only the row path reads through an indices mapping."""
        for start in range(0, len(self.dataset), rows):
            stop = min(start + rows, len(self.dataset))
            yield RowChunk(start, stop - start, None, lambda start=start, stop=stop: self._rows_between(start, stop))

    def _rows_between(self, first: int, stop: int) -> Iterator[dict[str, Any] | BadRow]:
        for start in range(first, stop, 1000):
            end = min(start + 1000, stop)
            try:
                batch = self.dataset[start:end]
            except UNREADABLE:
                yield from (_decoded_row(self.dataset, i) for i in range(start, end))
                continue
            columns = list(batch)
            for values in zip(*(batch[c] for c in columns)):
                yield dict(zip(columns, values))


def _decoded_row(dataset: Dataset, index: int) -> dict[str, Any] | BadRow:
    try:
        return dataset[index]
    except UNREADABLE as exc:
        return BadRow(f"the row cannot be read ({type(exc).__name__}: {exc})")

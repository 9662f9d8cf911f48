"""A pass over a store's rows, a range of base entries at a time, in forked processes: what
dedup and decontamination read. A row's entries are consecutive ids; a range takes the rows that
begin in it, each whole (entries past the range's end included), so every row is read once."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from multiprocessing import get_context
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import ConversionError
from ..read import EntryReader
from ..store import Datasets
from .texts import SampleText, sample_text

#: Base entries a task reads at a time.
ENTRIES_PER_TASK = 4_000
Result = TypeVar("Result")


@dataclass(frozen=True)
class Row:
    """A source row of the base index: its dataset, row number, first entry id and entries."""

    dataset_id: int
    row: int
    first: int
    entries: int


def rows_beginning(reader: EntryReader, first: int, last: int) -> list[Row]:
    """The rows whose first entry is in ``first..last``, each with all its entries."""
    found = reader.entries_between(first, last)
    if not found:
        return []
    before = reader.entries_between(first - 1, first - 1)
    begun = before[0][1:3] if before else None  # a row that began before the range is the range before's
    rows = []
    for (dataset_id, row), group in groupby(found, key=lambda entry: entry[1:3]):
        ids = [entry[0] for entry in group]
        if (dataset_id, row) != begun:
            rows.append(Row(dataset_id, row, ids[0], len(ids)))
    if rows and rows[-1].first + rows[-1].entries - 1 == last:  # the last row may go on past the range
        tail, more = rows[-1], last + 1
        while (next_entries := reader.entries_between(more, more + ENTRIES_PER_TASK - 1)):
            going = [entry for entry in next_entries if entry[1:3] == (tail.dataset_id, tail.row)]
            tail = Row(tail.dataset_id, tail.row, tail.first, tail.entries + len(going))
            if len(going) < len(next_entries):
                break
            more += ENTRIES_PER_TASK
        rows[-1] = tail
    return rows


def row_texts(reader: EntryReader, rows: list[Row]) -> list[SampleText | None]:
    """Each row's texts (None for a row that does not convert: nothing to compare)."""
    texts: list[SampleText | None] = []
    for row in rows:
        try:
            texts.append(sample_text(reader.whole(row.dataset_id, row.row, [None])))
        except ConversionError:  # render and verify say why; nothing here to compare
            texts.append(None)
    reader.release_rows()
    return texts


class RowPass(Generic[Result]):
    """``work(reader, rows)`` over every row of a store, a range at a time, in ``jobs`` forked
    processes (here, with one): the results in entry order."""

    current: ClassVar[Any] = None

    def __init__(self, reader: EntryReader, work: Callable[[EntryReader, list[Row]], Result]) -> None:
        self.reader, self.work = reader, work

    def run(self, jobs: int) -> Iterator[tuple[int, Result]]:
        """``(entries read, result)`` per range."""
        span = Datasets(self.reader.handle).entry_range()
        if span is None:
            return
        ranges = [(start, min(start + ENTRIES_PER_TASK - 1, span[1]))
                  for start in range(span[0], span[1] + 1, ENTRIES_PER_TASK)]
        if jobs == 1 or len(ranges) == 1:
            for first, last in ranges:
                yield last - first + 1, self.one(first, last)
            return
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork"), initializer=RowPass._start,
                                 initargs=(self,)) as pool:
            for (first, last), result in zip(ranges, pool.map(RowPass._range, *zip(*ranges))):
                yield last - first + 1, result

    def one(self, first: int, last: int) -> Result:
        return self.work(self.reader, rows_beginning(self.reader, first, last))

    @staticmethod
    def _start(work: RowPass[Any]) -> None:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        RowPass.current = work

    @staticmethod
    def _range(first: int, last: int) -> Any:
        return RowPass.current.one(first, last)

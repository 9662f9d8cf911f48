"""The summary rows written beside each mixture's draw (:mod:`.tables`): the base entries it
uses as spans and its rows by the times it draws them (a row's times are those of its most drawn
entry: a conversation of six turns drawn once shows six entries, once each, and is drawn once).

They are counted from arrays the writer holds (a draw's count per entry), so questions the
cookbook asks of 20M positions read a few hundred rows instead of every position.
A draw's rows are read from the store only when its counts do not tell them: not when each row
gave one entry, and, when every entry is drawn equally often, only until each level has its
first rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import Connection, insert, text

from ..sqlite import bulk  # its chunk size read at each call, so that tests can make it small
from ..sqlite.bulk import entry_rows
from ..summary_sql import REPEAT_ROWS
from .tables import RepeatCount, RepeatRow

_SPANS = text(
    "INSERT INTO mixture_spans (mixture_id, first_entry, entries) "
    "SELECT :mixture, :first + (value >> 32), value & 4294967295 FROM json_each(:spans)"
)


@dataclass
class DrawSummary:
    """One dataset's draw in a mixture, over every epoch: what ``mixture_datasets`` counts and
    what :func:`insert_draw_summary` writes."""

    distinct_entries: int = 0
    distinct_rows: int = 0
    max_repeats: int = 0
    #: times -> rows shown that many times
    levels: dict[int, int] = field(default_factory=dict)
    #: times -> the first rows (lowest numbers) shown that many times, at most REPEAT_ROWS
    examples: dict[int, list[int]] = field(default_factory=dict)

    def add_rows(self, numbers: np.ndarray, times: np.ndarray, *, count: bool = True) -> None:
        """Rows ``numbers`` (ascending, after every row added before) shown ``times`` times."""
        seen = times > 0
        numbers, times = numbers[seen], times[seen]
        order = np.argsort(times, kind="stable")
        found, first, per_level = np.unique(times[order], return_index=True, return_counts=True)
        for level, start, n in zip(found.tolist(), first.tolist(), per_level.tolist()):
            if count:
                self.levels[level] = self.levels.get(level, 0) + n
            kept = self.examples.setdefault(level, [])
            kept += numbers[order[start : start + min(n, REPEAT_ROWS - len(kept))]].tolist()
        if count:
            self.distinct_rows += len(numbers)

    def complete(self) -> bool:
        """Whether every level has its first rows."""
        return all(len(self.examples.get(level, ())) >= min(n, REPEAT_ROWS) for level, n in self.levels.items())


def summarise_draw(connection: Connection, first_entry: int, counts: np.ndarray, rows: int) -> DrawSummary:
    """The summary of a draw of ``counts`` (how often each base entry ``first_entry ...`` was
    drawn, over every epoch) from a dataset of ``rows`` rows (each gives at least one entry)."""
    drawn = counts > 0
    summary = DrawSummary(distinct_entries=int(np.count_nonzero(drawn)), max_repeats=int(counts.max(initial=0)))
    if not summary.distinct_entries:
        return summary
    if len(counts) == rows:  # a row per entry: the rows' times are the counts, and the first rows come early
        levels = np.bincount(counts)
        summary.levels = {int(level): int(levels[level]) for level in np.flatnonzero(levels[1:]) + 1}
        summary.distinct_rows = summary.distinct_entries
        for offset in range(0, len(counts), bulk.ROWS_PER_STATEMENT):
            chunk = counts[offset : offset + bulk.ROWS_PER_STATEMENT]
            summary.add_rows(np.arange(offset, offset + len(chunk)), chunk, count=False)
            if summary.complete():
                break
        numbers = _rows_of(connection, first_entry, sorted({i for kept in summary.examples.values() for i in kept}))
        summary.examples = {level: [numbers[i] for i in kept] for level, kept in summary.examples.items()}
        return summary
    if summary.distinct_entries == len(counts) and summary.max_repeats == int(counts.min()):
        # every entry drawn equally often: so is every row, and its first rows come first
        summary.levels = {summary.max_repeats: rows}
        summary.distinct_rows = rows
        for numbers, row_times in _row_times(connection, first_entry, counts):
            summary.add_rows(numbers, row_times, count=False)
            if summary.complete():
                break
        return summary
    for numbers, row_times in _row_times(connection, first_entry, counts):
        summary.add_rows(numbers, row_times)
    return summary


def _rows_of(connection: Connection, first_entry: int, offsets: list[int]) -> dict[int, int]:
    """Offset -> row of the base entries ``first_entry + offset``."""
    found = connection.execute(text("SELECT id, row FROM base_entries WHERE id IN (SELECT value FROM json_each(:ids))"),
                               {"ids": json.dumps([first_entry + offset for offset in offsets])})
    return {entry - first_entry: row for entry, row in found}


def _row_times(connection: Connection, first_entry: int, counts: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(rows, times)`` a chunk of entries at a time, in row order, a row's times those of its
    most drawn entry; a row that spans two chunks comes once, whole."""
    held: tuple[int, int] | None = None  # the last row of the chunk before, and its times so far
    for offset in range(0, len(counts), bulk.ROWS_PER_STATEMENT):
        chunk = counts[offset : offset + bulk.ROWS_PER_STATEMENT]
        rows = entry_rows(connection, first_entry + offset, len(chunk))
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        numbers, times = rows[starts], np.maximum.reduceat(chunk.astype(np.int64), starts)
        if held is not None:
            if numbers[0] == held[0]:
                times[0] = max(times[0], held[1])
            else:
                yield np.array([held[0]]), np.array([held[1]])
        held = int(numbers[-1]), int(times[-1])
        yield numbers[:-1], times[:-1]
    if held is not None:
        yield np.array([held[0]]), np.array([held[1]])


def insert_draw_summary(connection: Connection, mixture_id: int, dataset_id: int, first_entry: int,
                        counts: np.ndarray, summary: DrawSummary) -> None:
    """A draw's rows in ``mixture_spans`` (from ``counts``), ``repeat_counts`` and ``repeat_rows``."""
    edges = np.diff(np.r_[np.int8(0), (counts > 0).astype(np.int8), np.int8(0)])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    packed = (starts.astype(np.int64) << 32) | (ends - starts)
    for offset in range(0, len(packed), bulk.ROWS_PER_STATEMENT):
        connection.execute(_SPANS, {"mixture": mixture_id, "first": first_entry,
                                    "spans": json.dumps(packed[offset : offset + bulk.ROWS_PER_STATEMENT].tolist())})
    if summary.levels:
        connection.execute(insert(RepeatCount), [
            {"mixture_id": mixture_id, "dataset_id": dataset_id, "times": level, "rows": n}
            for level, n in sorted(summary.levels.items())
        ])
        connection.execute(insert(RepeatRow), [
            {"mixture_id": mixture_id, "dataset_id": dataset_id, "times": level, "row": row}
            for level, rows in sorted(summary.examples.items()) for row in rows
        ])


def draw_counts(connection: Connection, first_entry: int, counts: np.ndarray, rows: int) -> tuple[int, int, int]:
    """``(distinct entries, distinct rows, largest repeat count)`` of one dataset's draw, from
    ``counts``, how often each of its base entries ``first_entry ...`` was drawn, and ``rows``,
    how many rows those entries come from (each gives at least one).

    When every entry is drawn, or each row gave one entry, the rows follow from the counts.
    Otherwise they come from the store a chunk of entries at a time; a dataset's entries are
    stored in row order, so a row is counted where it first appears among the drawn entries.
    """
    drawn = counts > 0
    distinct_entries = int(np.count_nonzero(drawn))
    if not distinct_entries:
        return 0, 0, 0
    if distinct_entries == len(counts) or len(counts) == rows:
        return distinct_entries, rows if distinct_entries == len(counts) else distinct_entries, int(counts.max())
    distinct_rows, last_row = 0, None
    for offset in range(0, len(counts), bulk.ROWS_PER_STATEMENT):
        taken = drawn[offset : offset + bulk.ROWS_PER_STATEMENT]
        if not taken.any():
            continue
        unique = np.unique(entry_rows(connection, first_entry + offset, len(taken))[taken])
        distinct_rows += len(unique) - int(unique[0] == last_row)
        last_row = int(unique[-1])
    return distinct_entries, distinct_rows, int(counts.max())

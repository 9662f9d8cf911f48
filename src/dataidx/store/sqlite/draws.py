"""The summary rows written beside the base index and each mixture's draw (:mod:`..draw_tables`):
a dataset's rows by turns, and per mixture the base entries it uses as spans and its rows by
the times it shows them.

They are counted from arrays the writer holds (a dataset's rows, a draw's count per entry), so
questions the cookbook asks of 20M positions read a few hundred rows instead of every position.
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import Connection, insert, text

from ..draw_tables import REPEAT_ROWS, DatasetTurns, RepeatCount, RepeatRow
from .bulk import ROWS_PER_STATEMENT, entry_rows

_SPANS = text(
    "INSERT INTO mixture_spans (mixture_id, first_entry, entries) "
    "SELECT :mixture, :first + (value >> 32), value & 4294967295 FROM json_each(:spans)"
)


def row_lengths(rows: np.ndarray) -> np.ndarray:
    """Entries of each row in ``rows``, the row of each entry in entry order (a row's entries
    are consecutive)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    return np.diff(np.r_[starts, len(rows)])


def insert_dataset_turns(connection: Connection, dataset_id: int, histogram: np.ndarray) -> None:
    """``histogram[k]``: how many of the dataset's rows have ``k`` entries."""
    levels = np.flatnonzero(histogram)
    if len(levels):
        connection.execute(insert(DatasetTurns), [
            {"dataset_id": dataset_id, "turns": int(turns), "rows": int(histogram[turns])} for turns in levels
        ])


def insert_draw_summary(connection: Connection, mixture_id: int, dataset_id: int, first_entry: int,
                        counts: np.ndarray) -> None:
    """A dataset's rows in ``mixture_spans``, ``repeat_counts`` and ``repeat_rows``, from
    ``counts``: how often the mixture draws each of its entries ``first_entry ...``, over every
    epoch."""
    drawn = counts > 0
    if not drawn.any():
        return
    edges = np.diff(np.r_[0, drawn.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    packed = (starts.astype(np.int64) << 32) | (ends - starts)
    for offset in range(0, len(packed), ROWS_PER_STATEMENT):
        connection.execute(_SPANS, {"mixture": mixture_id, "first": first_entry,
                                    "spans": json.dumps(packed[offset : offset + ROWS_PER_STATEMENT].tolist())})
    rows = entry_rows(connection, first_entry, len(counts))
    lengths = row_lengths(rows)
    firsts = np.r_[0, np.cumsum(lengths)[:-1]]
    times = np.add.reduceat(counts.astype(np.int64), firsts)
    seen = times > 0
    times, numbers = times[seen], rows[firsts][seen]
    order = np.argsort(times, kind="stable")  # by times, rows ascending within each
    levels, first_of_level, per_level = np.unique(times[order], return_index=True, return_counts=True)
    connection.execute(insert(RepeatCount), [
        {"mixture_id": mixture_id, "dataset_id": dataset_id, "times": int(level), "rows": int(n)}
        for level, n in zip(levels, per_level)
    ])
    kept = np.concatenate([order[start : start + min(n, REPEAT_ROWS)] for start, n in zip(first_of_level, per_level)])
    connection.execute(insert(RepeatRow), [
        {"mixture_id": mixture_id, "dataset_id": dataset_id, "times": int(times[i]), "row": int(numbers[i])}
        for i in kept
    ])

"""Bulk inserts of the index: NumPy arrays in, millions of rows a second out (a packing plan's
are :mod:`dataidx.store.plans.bulk`).

Binding rows one by one through ``executemany`` costs about a microsecond a row, more than
SQLite's own work. Here each chunk of an array travels as one JSON text that SQLite unpacks in
C with ``json_each`` inside a single ``INSERT ... SELECT``: two to three times faster.
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import Connection, text

#: Rows one statement inserts (one JSON array of them), reads, or a position writer holds.
ROWS_PER_STATEMENT = 1_000_000

_BASE = text(
    "INSERT INTO base_entries (id, dataset_id, row, cut) "
    "SELECT :first + key, :dataset, value / :k, NULLIF(value % :k, 0) - 1 FROM json_each(:packed)"
)
_MIXTURE = text(
    "INSERT INTO mixture_entries (id, mixture_id, entry_id) SELECT :first + key, :mixture, value FROM json_each(:ids)"
)
_MIXTURE_RUN = text(
    "INSERT INTO mixture_runs (mixture_id, start, first_entry, length) VALUES (:mixture, :start, :first, :length)"
)
#: Runs of consecutive entries at least this long are stored as one mixture_runs row.
MIN_RUN = 64
def insert_base_entries(connection: Connection, dataset_id: int, first_id: int, rows: np.ndarray,
                        cuts: np.ndarray) -> None:
    """Entries ``first_id, first_id + 1, ...`` of one dataset; a cut below 0 is stored as NULL.

    Row and cut travel packed in one integer, ``row * k + cut + 1`` with ``k`` above every
    ``cut + 1``, so one JSON array carries both and 0 in the low part means NULL.
    """
    k = int(cuts.max(initial=0)) + 2
    packed = rows.astype(np.int64) * k + np.maximum(cuts.astype(np.int64) + 1, 0)
    for offset in range(0, len(packed), ROWS_PER_STATEMENT):
        chunk = packed[offset : offset + ROWS_PER_STATEMENT]
        connection.execute(
            _BASE, {"first": first_id + offset, "dataset": dataset_id, "k": k, "packed": json.dumps(chunk.tolist())}
        )


class PositionWriter:
    """Writes a mixture's positions as they come, a chunk of entry ids or a run at a time.

    A whole dataset, or a whole repeat of one, is a run of consecutive entry ids: a stretch of
    consecutive ids at least ``min_run`` long is stored as one ``mixture_runs`` row, the
    scattered rest as one ``mixture_entries`` row per position. Stretches are found across
    chunk boundaries, so the rows are the same however the ids are chunked; memory holds one
    chunk, never the whole mixture.
    """

    def __init__(self, connection: Connection, mixture_id: int, first_id: int, *, min_run: int = MIN_RUN) -> None:
        self.connection, self.mixture_id, self.min_run = connection, mixture_id, min_run
        self.position = first_id  # the position of the first id not yet classified
        self.stretch: tuple[int, int] | None = None  # (first entry id, length): may go on in the next chunk
        self.scattered: list[np.ndarray] = []  # ids at positions after those written, before the stretch
        self.scattered_count = 0

    def add_run(self, first_entry: int, length: int) -> None:
        """Entry ids ``first_entry .. first_entry + length - 1``, in order."""
        if length:
            self._extend(first_entry, length)

    def add_ids(self, ids: np.ndarray) -> None:
        """Entry ids in order, any pattern."""
        if not len(ids):
            return
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        starts = np.concatenate([[0], breaks])
        lengths = np.diff(np.concatenate([starts, [len(ids)]]))
        self._extend(int(ids[0]), int(lengths[0]))
        if len(starts) == 1:
            return
        # The stretches between the first and the last: each long one a run, the rest scattered.
        self._close_stretch()
        middle = slice(1, len(starts) - 1)
        done = int(starts[1])
        for start, length in zip(starts[middle][lengths[middle] >= self.min_run].tolist(),
                                 lengths[middle][lengths[middle] >= self.min_run].tolist()):
            self._scatter(ids[done:start])
            self._run(int(ids[start]), length)
            done = start + length
        self._scatter(ids[done : starts[-1]])
        self.stretch = (int(ids[starts[-1]]), int(lengths[-1]))

    def close(self) -> None:
        self._close_stretch()
        self._flush()

    def _extend(self, first_entry: int, length: int) -> None:
        if self.stretch is not None and sum(self.stretch) == first_entry:
            self.stretch = (self.stretch[0], self.stretch[1] + length)
            return
        self._close_stretch()
        self.stretch = (first_entry, length)

    def _close_stretch(self) -> None:
        if self.stretch is None:
            return
        first, length = self.stretch
        self.stretch = None
        if length >= self.min_run:
            self._run(first, length)
        else:
            self._scatter(np.arange(first, first + length, dtype=np.int64))

    def _run(self, first_entry: int, length: int) -> None:
        self._flush()
        self.connection.execute(_MIXTURE_RUN, {"mixture": self.mixture_id, "start": self.position,
                                               "first": first_entry, "length": length})
        self.position += length

    def _scatter(self, ids: np.ndarray) -> None:
        if len(ids):
            self.scattered.append(ids)
            self.scattered_count += len(ids)
            if self.scattered_count >= ROWS_PER_STATEMENT:
                self._flush()

    def _flush(self) -> None:
        if self.scattered:
            _send(self.connection, self.mixture_id, self.position, np.concatenate(self.scattered))
            self.position += self.scattered_count
            self.scattered, self.scattered_count = [], 0


def _send(connection: Connection, mixture_id: int, first_id: int, ids: np.ndarray) -> None:
    for offset in range(0, len(ids), ROWS_PER_STATEMENT):
        chunk = ids[offset : offset + ROWS_PER_STATEMENT].tolist()
        connection.execute(_MIXTURE, {"first": first_id + offset, "mixture": mixture_id, "ids": json.dumps(chunk)})


def entry_rows(connection: Connection, first_entry: int, count: int) -> np.ndarray:
    """The row of each base entry ``first_entry .. first_entry + count - 1``, read a chunk at a
    time as one comma-separated text of ``id << 32 | row`` (NumPy parses it in C: 0.31 s a
    million entries, where a JSON array took 0.53 s and a row object per entry 10x more)."""
    rows = np.zeros(count, dtype=np.int64)
    for offset in range(0, count, ROWS_PER_STATEMENT):
        last = min(offset + ROWS_PER_STATEMENT, count) - 1
        found = connection.execute(text(
            "SELECT group_concat((id << 32) | row) FROM base_entries WHERE id BETWEEN :first AND :last"
        ), {"first": first_entry + offset, "last": first_entry + last}).scalar_one()
        # sorted here: group_concat promises no order
        rows[offset : last + 1] = np.sort(np.fromstring(found or "", dtype=np.int64, sep=",")) & 0xFFFFFFFF
    return rows


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
    for offset in range(0, len(counts), ROWS_PER_STATEMENT):
        taken = drawn[offset : offset + ROWS_PER_STATEMENT]
        if not taken.any():
            continue
        unique = np.unique(entry_rows(connection, first_entry + offset, len(taken))[taken])
        distinct_rows += len(unique) - int(unique[0] == last_row)
        last_row = int(unique[-1])
    return distinct_entries, distinct_rows, int(counts.max())

"""Bulk inserts of mixtures and packing plans (the base index's are in :mod:`..base.arrays`): NumPy
arrays in, millions of rows a second out.

Binding rows one by one through ``executemany`` costs about a microsecond a row, more than
SQLite's own work. Here each chunk of an array travels as one JSON text that SQLite unpacks in
C with ``json_each`` inside a single ``INSERT ... SELECT``: two to three times faster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from sqlalchemy import Connection, TextClause, text

from ...errors import StoreError

T = TypeVar("T")

#: Rows one statement inserts (one JSON array of them), reads, or a position writer holds.
ROWS_PER_STATEMENT = 1_000_000
#: Rows of a packing plan one statement inserts: a quarter of the others, as the Python ints,
#: JSON text and SQLite's parse of a chunk are held twice over while the next one is encoded
#: (20M members: 170 MB less at the peak, the same time).
PLAN_ROWS_PER_STATEMENT = 1 << 18

_MIXTURE = text(
    "INSERT INTO mixture_entries (id, mixture_id, entry_id) SELECT :first + key, :mixture, value FROM json_each(:ids)"
)
_MIXTURE_RUN = text(
    "INSERT INTO mixture_runs (mixture_id, start, first_entry, length) VALUES (:mixture, :start, :first, :length)"
)
#: Runs of consecutive entries at least this long are stored as one mixture_runs row.
MIN_RUN = 64
# Pack members travel as one integer each, position << 32 | entry_id. Their ids are left to
# SQLite, which appends after the largest (the writer checks they are the ones it meant): an
# explicit id costs a uniqueness check a row, a fifth of the insert's time.
_MEMBERS = text(
    "INSERT INTO packed_entries (plan_id, position, entry_id) "
    "SELECT :plan, value >> 32, value & 4294967295 FROM json_each(:members)"
)
# A member joined to the next (a cut of a merged conversation) travels bit-inverted: negative.
_JOINED_MEMBERS = text(
    "INSERT INTO packed_entries (plan_id, position, entry_id, joined) "
    "SELECT :plan, v >> 32, v & 4294967295, value < 0 "
    "FROM (SELECT key, value, CASE WHEN value < 0 THEN ~value ELSE value END AS v FROM json_each(:members))"
)
# Packs as first member (from :first) << 32 | members << 16 | tokens, where those fit (any pack
# under a capacity below 2**16); else as members << 32 | tokens, each pack's first member the
# running sum before it, which SQLite computes by sorting the chunk: three times the time.
_SHORT_PACKS = text(
    "INSERT INTO packs (plan_id, pack, first_member, members, tokens) "
    "SELECT :plan, :pack + key, :first + (value >> 32), (value >> 16) & 65535, value & 65535 FROM json_each(:packs)"
)
_PACKS = text(
    "INSERT INTO packs (plan_id, pack, first_member, members, tokens) "
    "SELECT :plan, :pack + key, :first + sum(value >> 32) OVER (ORDER BY key) - (value >> 32), value >> 32, "
    "value & 4294967295 FROM json_each(:packs)"
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


def insert_pack_members(connection: Connection, plan_id: int, first_id: int, members: np.ndarray,
                        joined: np.ndarray | None = None) -> None:
    """Members ``first_id, first_id + 1, ...`` of a plan, each ``position << 32 | entry_id``;
    ``joined`` marks the members trained as one sequence with the next. ``first_id`` must be one
    past the table's largest id: a StoreError if SQLite numbered them otherwise."""
    statement = _MEMBERS if joined is None else _JOINED_MEMBERS
    if first_id + len(members) > 2**63:
        raise StoreError(f"packed_entries: no room for {len(members)} more members after id {first_id - 1}")

    def chunks() -> Iterator[tuple[None, np.ndarray]]:
        for offset in range(0, len(members), PLAN_ROWS_PER_STATEMENT):
            chunk = members[offset : offset + PLAN_ROWS_PER_STATEMENT]
            if joined is not None:
                chunk = np.where(joined[offset : offset + PLAN_ROWS_PER_STATEMENT], ~chunk, chunk)
            yield None, chunk

    for _, encoded in _encoded_ahead(chunks()):
        connection.execute(statement, {"plan": plan_id, "members": encoded})
    if len(members):
        last = connection.execute(text("SELECT max(id) FROM packed_entries")).scalar_one()
        if last != first_id + len(members) - 1:
            raise StoreError(f"packed_entries: members of plan {plan_id} were numbered up to {last}, not "
                             f"{first_id} .. {first_id + len(members) - 1} (a member id at the largest integer?)")


def insert_packs(connection: Connection, plan_id: int, *, first_member: int, sizes: np.ndarray,
                 tokens: np.ndarray, first_pack: int = 0) -> None:
    """Packs ``first_pack, first_pack + 1, ...`` of a plan with their member counts and tokens;
    pack ``i``'s members start at ``first_member`` plus the sizes of the packs before it."""
    starts = np.concatenate([[0], np.cumsum(sizes)])

    def chunks() -> Iterator[tuple[tuple[TextClause, int], np.ndarray]]:
        for offset in range(0, len(sizes), PLAN_ROWS_PER_STATEMENT):
            end = min(offset + PLAN_ROWS_PER_STATEMENT, len(sizes))
            chunk_sizes, chunk_tokens = sizes[offset:end].astype(np.int64), tokens[offset:end].astype(np.int64)
            if starts[end] - starts[offset] < 2**31 and max(chunk_sizes.max(), chunk_tokens.max()) < 2**16:
                first = starts[offset:end] - starts[offset]
                yield (_SHORT_PACKS, offset), first << 32 | chunk_sizes << 16 | chunk_tokens
            else:
                yield (_PACKS, offset), chunk_sizes << 32 | chunk_tokens

    for (statement, offset), encoded in _encoded_ahead(chunks()):
        connection.execute(statement, {"plan": plan_id, "pack": first_pack + offset,
                                       "first": first_member + int(starts[offset]), "packs": encoded})


def _encoded_ahead(chunks: Iterator[tuple[T, np.ndarray]]) -> Iterator[tuple[T, str]]:
    """Each ``(tag, chunk)`` with the chunk as a JSON array, the next one encoded in a thread
    while the caller inserts this one: SQLite lets go of the GIL while it works, and encoding is
    a quarter of the time."""
    with ThreadPoolExecutor(1, thread_name_prefix="dataidx-encode") as pool:
        pending: tuple[T, Future[str]] | None = None
        for tag, chunk in chunks:
            ahead = tag, pool.submit(_json_array, chunk)
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = ahead
        if pending is not None:
            yield pending[0], pending[1].result()


def _json_array(values: np.ndarray) -> str:
    return json.dumps(values.tolist())

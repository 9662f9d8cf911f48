"""A mixture's positions as one array of base entry ids, and a spec's lengths as arrays by entry.

Packing, the rendered engine and token budgets need, for every position, the entry behind it and
that entry's token count and status. Runs expand by arithmetic and only explicit positions are read, so a
1.9M-position mixture costs one small query plus one per spec, not a row object per position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import StoreError
from .handle import StoreHandle
from .records import StoredMixture

#: Rows fetched at a time when reading scattered positions.
_ROWS_PER_FETCH = 1 << 16
#: Entries whose lengths one query reads (one JSON array of them).
_ENTRIES_PER_LENGTHS_QUERY = 1 << 20


def position_entries(handle: StoreHandle, mixture: StoredMixture) -> np.ndarray:
    """Base entry id of every position of ``mixture`` (of the epoch it was read for), in position
    order (4-byte ids while they fit)."""
    last = handle.value("SELECT max(id) FROM base_entries") or 0
    entries = np.zeros(mixture.positions, dtype=np.int32 if last < 2**31 else np.int64)
    filled = np.zeros(mixture.positions, dtype=bool)
    runs = handle.all("SELECT start, first_entry, length FROM mixture_runs WHERE mixture_id = {mark} "
                      "AND start BETWEEN {mark} AND {mark}",
                      mixture.id, mixture.start, mixture.start + mixture.positions - 1)
    for start, first_entry, length in runs:
        offset = start - mixture.start
        entries[offset : offset + length] = np.arange(first_entry, first_entry + length, dtype=entries.dtype)
        filled[offset : offset + length] = True
    explicit = handle.execute("SELECT id, entry_id FROM mixture_entries WHERE id BETWEEN {mark} AND {mark}",
                              mixture.start, mixture.start + mixture.positions - 1)
    while found := explicit.fetchmany(_ROWS_PER_FETCH):  # a row tuple per position only a batch at a time
        pairs = np.asarray(found, dtype=np.int64)
        entries[pairs[:, 0] - mixture.start] = pairs[:, 1]
        filled[pairs[:, 0] - mixture.start] = True
    if not filled.all():
        raise StoreError(f"mixture '{mixture.name}' is missing positions; the store is damaged")
    return entries


@dataclass(frozen=True)
class SpecLengths:
    """Token counts and "trains" flags of one spec, indexed by ``entry_id - first``."""

    first: int
    tokens: np.ndarray
    trains: np.ndarray

    def of(self, entry_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.tokens[entry_ids - self.first], self.trains[entry_ids - self.first]


#: What :func:`spec_lengths` can read as an entry's length, and the expression it reads, one
#: integer per entry: ``(entry_id - chunk's first) << 33 | length << 1 | trains``, or -1 for a
#: length no render writes (negative, past 2**31 - 1, or text in a crafted SQLite file), which
#: would otherwise spill into the entry's bits or be read as a number it is not.
_PACKED_LENGTHS = {
    column: (f"CASE WHEN {column} BETWEEN 0 AND 2147483647 THEN (CAST(entry_id - {{mark}} AS bigint) << 33) | "
             f"(CAST({column} AS bigint) << 1) | CAST(status IN ({{trains}}) AS integer) ELSE -1 END")
    for column in ("tokens", "supervised_tokens")
}
LENGTH_COLUMNS = tuple(_PACKED_LENGTHS)


def _integers(handle: StoreHandle, template: str, *parameters: object) -> np.ndarray:
    """The integers of a read whose one value is a :attr:`Dialect.int_list` text. NumPy parses
    the text: a Python int per value (a row, or a JSON array's item) costs more than the SQL."""
    text = handle.value(template, *parameters)
    if not text:
        return np.zeros(0, dtype=np.int64)
    try:
        values = np.fromstring(text, dtype=np.int64, sep=",")
    except ValueError:
        values = None
    # A text NumPy cannot read to its end gives a short array (an older NumPy warns and stops):
    # counted, not caught as a warning, whose filters are the whole process's, not this thread's.
    if values is None or len(values) != text.count(",") + 1:
        raise StoreError("the store holds a value that is not an integer where one is; the store is damaged")
    return values


def spec_lengths(handle: StoreHandle, spec_id: int, column: str = "tokens") -> SpecLengths:
    """Every base entry's tokens (or ``supervised_tokens``) and trains flag under a spec (the spec
    covers every entry).

    Read a million entries at a time, each chunk as one text of
    ``entry offset << 33 | tokens << 1 | trains`` (1.35x a JSON array, which was twice as fast as
    fetching rows): the text for a chunk only, 5 bytes an entry in the arrays kept.
    """
    first, last, count = handle.one(
        "SELECT min(entry_id), max(entry_id), count(*) FROM entry_renders WHERE spec_id = {mark}", spec_id) or (0, 0, 0)
    if not count:
        return SpecLengths(1, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool))
    if last - first + 1 != count:
        raise StoreError("a render spec does not cover every base entry; the store is damaged")
    if column not in LENGTH_COLUMNS:
        raise ValueError(f"column must be one of {LENGTH_COLUMNS}, got {column!r}")
    chunk = ("SELECT " + handle.dialect.int_list.format(_PACKED_LENGTHS[column])
             + " FROM entry_renders WHERE spec_id = {mark} AND entry_id BETWEEN {mark} AND {mark}")
    tokens, trains = np.zeros(count, dtype=np.int32), np.zeros(count, dtype=bool)
    for start in range(first, last + 1, _ENTRIES_PER_LENGTHS_QUERY):
        stop = min(start + _ENTRIES_PER_LENGTHS_QUERY - 1, last)
        values = _integers(handle, chunk, start, spec_id, start, stop)
        values.sort()  # by entry id
        if len(values) and values[0] < 0:
            raise StoreError(f"a render spec holds {column} that no render writes (negative, past 2**31 - 1 or not a "
                             "number); the store is damaged")
        if not np.array_equal(values >> 33, np.arange(stop - start + 1)):
            raise StoreError("a render spec does not cover every base entry; the store is damaged")
        tokens[start - first : stop - first + 1] = (values >> 1) & 0xFFFFFFFF
        trains[start - first : stop - first + 1] = (values & 1).astype(bool)
    return SpecLengths(first, tokens, trains)


def row_starts(handle: StoreHandle) -> tuple[int, np.ndarray]:
    """``(first, starts)``: whether base entry ``first + i`` is the first entry of its row, for
    every base entry. The cuts of a row are consecutive entries (the build writes them in order),
    so a row is the entries from one start to the next: what merging a row's cuts needs to know.

    Read a million entries at a time as one text of ``id offset << 32 | row``, like the lengths."""
    first, last = handle.one("SELECT min(id), max(id) FROM base_entries") or (None, None)
    if first is None or last is None:
        return 1, np.zeros(0, dtype=bool)
    chunk = ("SELECT " + handle.dialect.int_list.format(
        'CASE WHEN "row" BETWEEN 0 AND 4294967295 THEN (CAST(id - {mark} AS bigint) << 32) | "row" ELSE -1 END')
             + " FROM base_entries WHERE id BETWEEN {mark} AND {mark}")
    rows = np.zeros(last - first + 1, dtype=np.int64)
    for start in range(first, last + 1, _ENTRIES_PER_LENGTHS_QUERY):
        stop = min(start + _ENTRIES_PER_LENGTHS_QUERY - 1, last)
        values = _integers(handle, chunk, start, start, stop)
        values.sort()
        if len(values) and values[0] < 0:
            raise StoreError("a base entry names a row no build writes (negative, past 2**32 - 1 or not a number); "
                             "the store is damaged")
        if not np.array_equal(values >> 32, np.arange(stop - start + 1)):
            raise StoreError("base entries are not numbered without gaps; the store is damaged")
        rows[start - first : stop - first + 1] = values & 0xFFFFFFFF
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = rows[1:] != rows[:-1]
    datasets = np.array([entry for (entry,) in handle.all("SELECT first_entry FROM datasets")], dtype=np.int64)
    datasets = datasets[(datasets >= first) & (datasets <= last)] - first
    starts[datasets] = True  # row 0 of a dataset after a one-row dataset
    return first, starts

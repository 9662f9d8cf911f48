"""A mixture's positions as one array of base entry ids, and a spec's lengths as arrays by entry.

Packing and the rendered engine need, for every position, the entry behind it and that entry's
token count and status. Runs expand by arithmetic and only explicit positions are read, so a
1.9M-position mixture costs one small query plus one per spec, not a row object per position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..errors import StoreError
from ..store import ReadConnection, StoredMixture
from .renderer import TRAINS

#: Rows fetched at a time when reading scattered positions.
_FETCH = 1 << 16


def position_entries(connection: ReadConnection, mixture: StoredMixture) -> np.ndarray:
    """Base entry id of every position of ``mixture``, in position order."""
    entries = np.zeros(mixture.entries, dtype=np.int64)
    filled = np.zeros(mixture.entries, dtype=bool)
    sql = connection.dialect.sql
    runs = connection.execute(
        sql("SELECT start, first_entry, length FROM mixture_runs WHERE mixture_id = {mark}"), (mixture.id,)
    ).fetchall()
    for start, first_entry, length in runs:
        offset = start - mixture.start
        entries[offset : offset + length] = np.arange(first_entry, first_entry + length)
        filled[offset : offset + length] = True
    explicit = connection.execute(
        sql("SELECT id, entry_id FROM mixture_entries WHERE id BETWEEN {mark} AND {mark}"),
        (mixture.start, mixture.start + mixture.entries - 1),
    )
    while found := explicit.fetchmany(_FETCH):  # a row tuple per position only a batch at a time
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


_PACKED_LENGTH = "(CAST(entry_id AS bigint) << 33) | (CAST(tokens AS bigint) << 1) | CAST(status IN ({trains}) AS integer)"


def spec_lengths(connection: ReadConnection, spec_id: int) -> SpecLengths:
    """Every base entry's tokens and trains flag under a spec (the spec covers every entry)."""
    # One JSON array of entry_id << 33 | tokens << 1 | trains: twice as fast as fetching rows.
    dialect = connection.dialect
    packed = dialect.json_array.format(_PACKED_LENGTH.format(trains=", ".join(f"'{s}'" for s in TRAINS)))
    sql = dialect.sql("SELECT {packed} FROM entry_renders WHERE spec_id = {mark}", packed=packed)
    found = connection.execute(sql, (spec_id,)).fetchone()[0]
    values = np.array(json.loads(found or "[]"), dtype=np.int64)
    if not len(values):
        return SpecLengths(1, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
    values.sort()  # by entry id
    ids = values >> 33
    first = int(ids[0])
    if ids[-1] - first + 1 != len(ids) or (len(ids) > 1 and (np.diff(ids) != 1).any()):
        raise StoreError("a render spec does not cover every base entry; the store is damaged")
    return SpecLengths(first, (values >> 1) & 0xFFFFFFFF, (values & 1).astype(bool))

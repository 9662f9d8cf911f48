"""Bulk inserts of a packing plan's packs and members: NumPy arrays in, millions of rows a second out.

Binding rows one by one through ``executemany`` costs about a microsecond a row, more than
SQLite's own work. Here each chunk of an array travels as one JSON text that SQLite unpacks in
C with ``json_each`` inside a single ``INSERT ... SELECT``, the next chunk encoded in a thread
meanwhile. :meth:`.records.Plans.save` imports this module when it writes: the noun's reads load
neither NumPy nor SQLAlchemy.
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

#: Rows of a packing plan one statement inserts: a quarter of the others, as the Python ints,
#: JSON text and SQLite's parse of a chunk are held twice over while the next one is encoded
#: (20M members: 170 MB less at the peak, the same time).
PLAN_ROWS_PER_STATEMENT = 1 << 18

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

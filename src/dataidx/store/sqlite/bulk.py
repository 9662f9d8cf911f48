"""Bulk inserts of the index and of packing plans: NumPy arrays in, millions of rows a second out.

Binding rows one by one through ``executemany`` costs about a microsecond a row, more than
SQLite's own work. Here each chunk of an array travels as one JSON text that SQLite unpacks in
C with ``json_each`` inside a single ``INSERT ... SELECT``: two to three times faster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from sqlalchemy import Connection, text

CHUNK = 1_000_000

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
# Pack members travel as one integer each, position << 32 | entry_id.
_MEMBERS = text(
    "INSERT INTO packed_entries (id, plan_id, position, entry_id) "
    "SELECT :first + key, :plan, value >> 32, value & 4294967295 FROM json_each(:members)"
)
# Packs as members << 32 | tokens; each pack's first member is the running sum before it.
_PACKS = text(
    "INSERT INTO packs (plan_id, pack, first_member, members, tokens) "
    "SELECT :plan, :pack + key, :first + sum(value >> 32) OVER (ORDER BY key) - (value >> 32), value >> 32, "
    "value & 4294967295 FROM json_each(:packs)"
)


def insert_base_entries(connection: Connection, dataset_id: int, first_id: int, rows: np.ndarray,
                        cuts: np.ndarray) -> None:
    """Entries ``first_id, first_id + 1, ...`` of one dataset; a cut below 0 is stored as NULL.

    Row and cut travel packed in one integer, ``row * k + cut + 1`` with ``k`` above every
    ``cut + 1``, so one JSON array carries both and 0 in the low part means NULL.
    """
    k = int(cuts.max(initial=0)) + 2
    packed = rows.astype(np.int64) * k + np.maximum(cuts.astype(np.int64) + 1, 0)
    for offset in range(0, len(packed), CHUNK):
        chunk = packed[offset : offset + CHUNK]
        connection.execute(
            _BASE, {"first": first_id + offset, "dataset": dataset_id, "k": k, "packed": json.dumps(chunk.tolist())}
        )


def insert_mixture_entries(connection: Connection, mixture_id: int, first_id: int, entry_ids: Sequence[int], *,
                           min_run: int = MIN_RUN) -> None:
    """Positions ``first_id, first_id + 1, ...`` of a mixture, pointing at base entries.

    A whole dataset, or a whole repeat of one, is a run of consecutive entry ids: a run of at
    least ``min_run`` is stored as one ``mixture_runs`` row; the scattered rest as one
    ``mixture_entries`` row per position.
    """
    ids = np.asarray(entry_ids, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(ids)]])
    pending = 0  # start of the ids not yet written
    for start, end in zip(starts.tolist(), ends.tolist()):
        if end - start < min_run:
            continue
        _send(connection, mixture_id, first_id + pending, ids[pending:start])
        connection.execute(_MIXTURE_RUN, {"mixture": mixture_id, "start": first_id + start,
                                          "first": int(ids[start]), "length": end - start})
        pending = end
    _send(connection, mixture_id, first_id + pending, ids[pending:])


def _send(connection: Connection, mixture_id: int, first_id: int, ids: np.ndarray) -> None:
    for offset in range(0, len(ids), CHUNK):
        chunk = ids[offset : offset + CHUNK].tolist()
        connection.execute(_MIXTURE, {"first": first_id + offset, "mixture": mixture_id, "ids": json.dumps(chunk)})


def draw_counts(connection: Connection, first_entry: int, entries: int, chosen: Sequence[int]) -> tuple[int, int, int]:
    """``(distinct entries, distinct rows, largest repeat count)`` of one dataset's draw: the
    entry ids ``chosen`` among its base entries ``first_entry .. first_entry + entries - 1``."""
    ids = np.asarray(chosen, dtype=np.int64)
    if not len(ids):
        return 0, 0, 0
    unique, repeats = np.unique(ids, return_counts=True)
    # The rows of the dataset's entries in one JSON array: a row object per entry costs 10x more.
    # id << 32 | row, sorted here: json_group_array promises no order.
    found = connection.execute(text(
        "SELECT json_group_array((id << 32) | row) FROM base_entries WHERE id BETWEEN :first AND :last"
    ), {"first": first_entry, "last": first_entry + entries - 1}).scalar()
    packed = np.sort(np.asarray(json.loads(found), dtype=np.int64))
    rows = packed & 0xFFFFFFFF
    return len(unique), len(np.unique(rows[unique - first_entry])), int(repeats.max())


def insert_pack_members(connection: Connection, plan_id: int, first_id: int, members: np.ndarray) -> None:
    """Members ``first_id, first_id + 1, ...`` of a plan, each ``position << 32 | entry_id``."""
    for offset in range(0, len(members), CHUNK):
        connection.execute(_MEMBERS, {"first": first_id + offset, "plan": plan_id,
                                      "members": json.dumps(members[offset : offset + CHUNK].tolist())})


def insert_packs(connection: Connection, plan_id: int, first_member: int, sizes: np.ndarray,
                 tokens: np.ndarray) -> None:
    """Packs ``0, 1, ...`` of a plan with their member counts and tokens; pack ``i``'s members
    start at ``first_member`` plus the sizes of the packs before it."""
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for offset in range(0, len(sizes), CHUNK):
        chunk = (sizes[offset : offset + CHUNK] << 32) | tokens[offset : offset + CHUNK]
        connection.execute(_PACKS, {"plan": plan_id, "pack": offset, "first": first_member + int(starts[offset]),
                                    "packs": json.dumps(chunk.tolist())})

"""The base index as NumPy arrays: a build's entries written a million rows a statement, and
the start of every row read back a million entries a query. Only :class:`.records.Datasets`
imports this module, in the methods that take or give arrays: the read path loads neither NumPy
nor SQLAlchemy.
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import Connection, text

from ..specs.lengths import LengthReads, key_chunks
from ..sqlite import bulk  # its chunk size read at each call, so that tests can make it small

_BASE = text(
    "INSERT INTO base_entries (id, dataset_id, row, cut) "
    "SELECT :first + key, :dataset, value / :k, NULLIF(value % :k, 0) - 1 FROM json_each(:packed)"
)


def insert_base_entries(connection: Connection, dataset_id: int, first_id: int, rows: np.ndarray,
                        cuts: np.ndarray) -> None:
    """Entries ``first_id, first_id + 1, ...`` of one dataset; a cut below 0 is stored as NULL.

    Row and cut travel packed in one integer, ``row * k + cut + 1`` with ``k`` above every
    ``cut + 1``, so one JSON array carries both and 0 in the low part means NULL. Each chunk
    travels as one JSON text that SQLite unpacks in C (see :mod:`dataidx.store.sqlite.bulk`).
    """
    k = int(cuts.max(initial=0)) + 2
    packed = rows.astype(np.int64) * k + np.maximum(cuts.astype(np.int64) + 1, 0)
    for offset in range(0, len(packed), bulk.ROWS_PER_STATEMENT):
        chunk = packed[offset : offset + bulk.ROWS_PER_STATEMENT]
        connection.execute(
            _BASE, {"first": first_id + offset, "dataset": dataset_id, "k": k, "packed": json.dumps(chunk.tolist())}
        )


def row_starts(reads: LengthReads, found: tuple[int, int] | None, dataset_firsts: list[int]) -> tuple[int, np.ndarray]:
    """``(first, starts)``: whether base entry ``first + i`` is the first entry of its row, for
    every base entry ``found`` (``(first, last)``, None for none) of datasets starting at
    ``dataset_firsts``. The cuts of a row are consecutive entries (the build writes them in
    order), so a row is the entries from one start to the next: what merging a row's cuts needs.

    Read a million entries at a time (:func:`~dataidx.store.positions.key_chunks`), like a spec's
    lengths."""
    if found is None:
        return 1, np.zeros(0, dtype=bool)
    first, last = found
    rows = np.zeros(last - first + 1, dtype=np.int64)
    for start, values in key_chunks(
            reads, "base_entries", "id", 'CAST("row" AS bigint)', '"row" BETWEEN 0 AND 4294967295', first, last,
            refused="a base entry names a row no build writes (negative, past 2**32 - 1 or not a number); the store "
                    "is damaged",
            gaps="base entries are not numbered without gaps; the store is damaged"):
        rows[start - first : start - first + len(values)] = values
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = rows[1:] != rows[:-1]
    datasets = np.array(dataset_firsts, dtype=np.int64)
    datasets = datasets[(datasets >= first) & (datasets <= last)] - first
    starts[datasets] = True  # row 0 of a dataset after a one-row dataset
    return first, starts

"""Rows by the times they are drawn: ``repeat_counts`` and ``repeat_rows`` count a row's times
as those of its most drawn entry, not the sum over its entries. Summed, a conversation of six
turns drawn once counted six, so "which rows repeat most" listed long conversations drawn once.

Existing mixtures are counted again from their positions in NumPy, as revision 0014 first counted
them; downgrading counts the sums back.

Revision ID: 0016
Revises: 0015
"""

from itertools import chain

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

#: Rows kept per level in repeat_rows (``dataidx.store.schema.REPEAT_ROWS``).
_REPEAT_ROWS = 100
#: Base entries (or positions) read per query.
_CHUNK = 1 << 20


def _entry_rows(bind: sa.Connection, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Dataset id and row number of base entries ``first .. last`` (dataset 0 where an id is unused)."""
    datasets = np.zeros(last - first + 1, dtype=np.int64)
    rows = np.zeros(last - first + 1, dtype=np.int64)
    for start in range(first, last + 1, _CHUNK):
        read = bind.execute(sa.text('SELECT id, dataset_id, "row" FROM base_entries WHERE id BETWEEN :a AND :b'),
                            {"a": start, "b": start + _CHUNK - 1})
        found = np.fromiter(chain.from_iterable(read), dtype=np.int64).reshape(-1, 3)
        datasets[found[:, 0] - first], rows[found[:, 0] - first] = found[:, 1], found[:, 2]
    return datasets, rows


def _draw_counts(bind: sa.Connection, mixture_id: int, first: int, entries: int) -> np.ndarray:
    """How many positions of the mixture, over every epoch, show each base entry."""
    counts = np.zeros(entries, dtype=np.int64)
    for first_entry, length in bind.execute(sa.text("SELECT first_entry, length FROM mixture_runs WHERE "
                                                    "mixture_id = :m"), {"m": mixture_id}).all():
        counts[first_entry - first : first_entry - first + length] += 1
    explicit = bind.execute(sa.text("SELECT entry_id FROM mixture_entries WHERE mixture_id = :m"), {"m": mixture_id})
    while found := explicit.fetchmany(_CHUNK):
        counts += np.bincount(np.fromiter(chain.from_iterable(found), dtype=np.int64) - first, minlength=entries)
    return counts


def _insert(bind: sa.Connection, table: str, columns: tuple[str, ...], values: list[tuple[int, ...]]) -> None:
    if values:
        names = [f"v{k}" for k in range(len(columns))]
        marks = ", ".join(":" + name for name in names)
        bind.execute(sa.text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"),
                     [dict(zip(names, row)) for row in values])


def _count_rows(row_times: np.ufunc) -> None:
    """Every mixture's ``repeat_counts`` and ``repeat_rows`` again, a row's times the ``row_times``
    reduction of its entries' counts (``np.maximum``: drawn; ``np.add``: shown, before 0016)."""
    bind = op.get_bind()
    bind.execute(sa.text("DELETE FROM repeat_rows"))
    bind.execute(sa.text("DELETE FROM repeat_counts"))
    first, last = bind.execute(sa.text("SELECT min(id), max(id) FROM base_entries")).one()
    if first is None:
        return
    datasets, rows = _entry_rows(bind, first, last)
    row_first = np.flatnonzero(np.r_[True, (datasets[1:] != datasets[:-1]) | (rows[1:] != rows[:-1])])
    row_dataset, row_number = datasets[row_first], rows[row_first]
    for (mixture_id,) in bind.execute(sa.text("SELECT id FROM mixtures ORDER BY id")).all():
        times = row_times.reduceat(_draw_counts(bind, mixture_id, first, len(datasets)), row_first)
        shown = (times > 0) & (row_dataset > 0)  # drawn, and not an unused id
        dataset, time, number = row_dataset[shown], times[shown], row_number[shown]
        pairs, per_level = np.unique(dataset << 32 | time, return_counts=True)
        _insert(bind, "repeat_counts", ("mixture_id", "dataset_id", "times", "rows"),
                [(mixture_id, int(pair >> 32), int(pair & 0xFFFFFFFF), int(n)) for pair, n in zip(pairs, per_level)])
        # The first rows (lowest numbers) of each (dataset, times) level.
        order = np.lexsort((number, time, dataset))
        keys = dataset[order] << 32 | time[order]
        group_starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        rank = np.arange(len(order)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(order)]))
        kept = order[rank < _REPEAT_ROWS]
        _insert(bind, "repeat_rows", ("mixture_id", "dataset_id", "times", '"row"'),
                [(mixture_id, int(d), int(t), int(r)) for d, t, r in zip(dataset[kept], time[kept], number[kept])])


def upgrade() -> None:
    _count_rows(np.maximum)


def downgrade() -> None:
    _count_rows(np.add)

"""Draw summaries: ``dataset_turns`` (a dataset's rows by their number of entries), per mixture
``mixture_spans`` (the base entries it uses, as ranges), ``repeat_counts`` (its rows by the times
it shows them) and ``repeat_rows`` (the first rows of each such level), and per render spec
``render_statuses`` (entries by dataset and status) and ``render_blocks`` (the training entries
and tokens of each block of 256 entries), written with the base index, each mixture and each
spec so that the cookbook reads them instead of every position or entry.

Existing stores get them counted once from what they hold: the base index and each mixture's
positions in NumPy, a few arrays of one number per base entry (SQL's GROUP BY over every position
took 26 min and 5.1 GiB at 20M positions), and each spec's entries in SQL, one pass each.

Revision ID: 0014
Revises: 0013
"""

from itertools import chain

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
#: Rows kept per level in repeat_rows (``dataidx.store.schema.REPEAT_ROWS``).
_REPEAT_ROWS = 100
#: Entries per render_blocks block (``dataidx.store.schema.BLOCK_ENTRIES``).
_BLOCK_ENTRIES = 256

_STATUSES = """
INSERT INTO render_statuses (spec_id, dataset_id, status, entries, longest)
SELECT l.spec_id, d.id, l.status, count(*), max(l.full_tokens)
FROM entry_renders AS l CROSS JOIN datasets AS d
WHERE l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1
GROUP BY l.spec_id, d.id, l.status
"""
_BLOCKS = f"""
INSERT INTO render_blocks (spec_id, block, dataset_id, entries, tokens, supervised_tokens)
SELECT l.spec_id, l.entry_id / {_BLOCK_ENTRIES}, d.id, count(*), sum(l.tokens), sum(l.supervised_tokens)
FROM entry_renders AS l CROSS JOIN datasets AS d
WHERE l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1 AND l.status IN ('ok', 'truncated')
GROUP BY l.spec_id, l.entry_id / {_BLOCK_ENTRIES}, d.id
"""


def _table(name: str, keys: tuple[tuple[str, str], ...], values: tuple[str, ...], text: tuple[str, ...] = ()) -> None:
    """A WITHOUT ROWID table keyed by ``keys`` (column, referred table or '') with integer
    ``values``; the columns named in ``text`` are strings."""
    op.create_table(
        name,
        *(sa.Column(column, sa.String() if column in text else _INT, nullable=False)
          for column in (*(key for key, _ in keys), *values)),
        *(sa.ForeignKeyConstraint([column], [f"{table}.id"], name=op.f(f"fk_{name}_{column}_{table}"))
          for column, table in keys if table),
        sa.PrimaryKeyConstraint(*(column for column, _ in keys), name=op.f(f"pk_{name}")),
        sqlite_with_rowid=False,
    )


#: Base entries (or positions) read per query.
_CHUNK = 1 << 20


def _entry_rows(bind: sa.Connection, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Dataset id and row number of base entries ``first .. last`` (dataset 0 where an id is unused)."""
    datasets = np.zeros(last - first + 1, dtype=np.int64)
    rows = np.zeros(last - first + 1, dtype=np.int64)
    for start in range(first, last + 1, _CHUNK):
        read = bind.execute(sa.text('SELECT id, dataset_id, "row" FROM base_entries WHERE id BETWEEN :a AND :b'),
                            {"a": start, "b": start + _CHUNK - 1})
        found = np.fromiter(chain.from_iterable(read), dtype=np.int64).reshape(-1, 3)  # not a Row object each
        datasets[found[:, 0] - first], rows[found[:, 0] - first] = found[:, 1], found[:, 2]
    return datasets, rows


def _draw_counts(bind: sa.Connection, mixture_id: int, first: int, entries: int) -> np.ndarray:
    """How many positions of the mixture, over every epoch, show each base entry."""
    counts = np.zeros(entries, dtype=np.int64)
    runs = bind.execute(sa.text("SELECT first_entry, length FROM mixture_runs WHERE mixture_id = :m"),
                        {"m": mixture_id}).all()
    for first_entry, length in runs:
        counts[first_entry - first : first_entry - first + length] += 1
    explicit = bind.execute(sa.text("SELECT entry_id FROM mixture_entries WHERE mixture_id = :m"), {"m": mixture_id})
    while found := explicit.fetchmany(_CHUNK):
        counts += np.bincount(np.fromiter(chain.from_iterable(found), dtype=np.int64) - first, minlength=entries)
    return counts


def _levels(keys: np.ndarray, values: np.ndarray) -> list[tuple[int, int, int]]:
    """``(key, value, how many)`` for each distinct pair (both below 2**31)."""
    pairs, counts = np.unique(keys << 32 | values, return_counts=True)
    return [(int(pair >> 32), int(pair & 0xFFFFFFFF), int(n)) for pair, n in zip(pairs, counts)]


def _count_draws(bind: sa.Connection) -> None:
    """``dataset_turns`` from the base index; per mixture ``mixture_spans``, ``repeat_counts`` and
    ``repeat_rows`` from the base entries its positions show, as the build and mix count them."""
    first, last = bind.execute(sa.text("SELECT min(id), max(id) FROM base_entries")).one()
    if first is None:
        return
    datasets, rows = _entry_rows(bind, first, last)
    dataset_starts = np.r_[True, datasets[1:] != datasets[:-1]]
    row_first = np.flatnonzero(dataset_starts | np.r_[True, rows[1:] != rows[:-1]])
    row_dataset, row_number = datasets[row_first], rows[row_first]
    real = row_dataset > 0  # not an unused id
    turns = np.diff(np.r_[row_first, len(rows)])
    _insert(bind, "dataset_turns", ("dataset_id", "turns", "rows"), _levels(row_dataset[real], turns[real]))
    for (mixture_id,) in bind.execute(sa.text("SELECT id FROM mixtures ORDER BY id")).all():
        counts = _draw_counts(bind, mixture_id, first, len(datasets))
        drawn = counts > 0
        # Spans: islands of drawn entries, broken where a dataset starts.
        starts = np.flatnonzero(drawn & (np.r_[True, ~drawn[:-1]] | dataset_starts))
        ends = np.flatnonzero(drawn & (np.r_[~drawn[1:], True] | np.r_[dataset_starts[1:], True])) + 1
        _insert(bind, "mixture_spans", ("mixture_id", "first_entry", "entries"),
                [(mixture_id, int(start) + first, int(end - start)) for start, end in zip(starts, ends)])
        times = np.add.reduceat(counts, row_first)
        shown = (times > 0) & real
        levels = _levels(row_dataset[shown], times[shown])
        _insert(bind, "repeat_counts", ("mixture_id", "dataset_id", "times", "rows"),
                [(mixture_id, *level) for level in levels])
        # The first rows (lowest numbers) of each (dataset, times) level.
        order = np.lexsort((row_number[shown], times[shown], row_dataset[shown]))
        keys = np.stack([row_dataset[shown][order], times[shown][order]], axis=1)
        group_starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
        rank = np.arange(len(order)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(order)]))
        kept = order[rank < _REPEAT_ROWS]
        _insert(bind, "repeat_rows", ("mixture_id", "dataset_id", "times", '"row"'),
                [(mixture_id, int(d), int(t), int(r)) for d, t, r in
                 zip(row_dataset[shown][kept], times[shown][kept], row_number[shown][kept])])


def _insert(bind: sa.Connection, table: str, columns: tuple[str, ...], values: list[tuple[int, ...]]) -> None:
    if values:
        names = [f"v{k}" for k in range(len(columns))]
        marks = ", ".join(":" + name for name in names)
        bind.execute(sa.text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"),
                     [dict(zip(names, row)) for row in values])


def upgrade() -> None:
    _table("dataset_turns", (("dataset_id", "datasets"), ("turns", "")), ("rows",))
    _table("mixture_spans", (("mixture_id", "mixtures"), ("first_entry", "")), ("entries",))
    _table("repeat_counts", (("mixture_id", "mixtures"), ("dataset_id", "datasets"), ("times", "")), ("rows",))
    _table("render_statuses", (("spec_id", "render_specs"), ("dataset_id", "datasets"), ("status", "")),
           ("entries", "longest"), text=("status",))
    _table("render_blocks", (("spec_id", "render_specs"), ("block", ""), ("dataset_id", "datasets")),
           ("entries", "tokens", "supervised_tokens"))
    _table("repeat_rows", (("mixture_id", "mixtures"), ("dataset_id", "datasets"), ("times", ""), ("row", "")), ())
    _count_draws(op.get_bind())
    op.execute(_STATUSES)
    op.execute(_BLOCKS)


def downgrade() -> None:
    for table in ("render_blocks", "render_statuses", "repeat_rows", "repeat_counts", "mixture_spans", "dataset_turns"):
        op.drop_table(table)

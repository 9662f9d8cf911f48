"""Draw summaries: ``dataset_turns`` (a dataset's rows by their number of entries), per mixture
``mixture_spans`` (the base entries it uses, as ranges), ``repeat_counts`` (its rows by the times
it shows them) and ``repeat_rows`` (the first rows of each such level), and per render spec
``render_statuses`` (entries by dataset and status) and ``render_blocks`` (the training entries
and tokens of each block of 256 entries), written with the base index, each mixture and each
spec so that the cookbook reads them instead of every position or entry.

Existing stores get them counted once from what they hold: a pass over every position of every
mixture and every entry of every spec (minutes at 20M positions), what each of those cookbook
queries cost before.

Revision ID: 0014
Revises: 0013
"""

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

_TURNS = """
INSERT INTO dataset_turns (dataset_id, turns, rows)
SELECT dataset_id, turns, count(*) FROM (
  SELECT dataset_id, count(*) AS turns FROM base_entries GROUP BY dataset_id, row
) AS r GROUP BY dataset_id, turns
"""
# Islands of consecutive entries drawn, within a dataset: an entry id minus its rank is
# constant along one.
_SPANS = """
INSERT INTO mixture_spans (mixture_id, first_entry, entries)
SELECT mixture_id, min(entry_id), count(*) FROM (
  SELECT u.mixture_id, b.dataset_id, u.entry_id,
         u.entry_id - row_number() OVER (PARTITION BY u.mixture_id, b.dataset_id ORDER BY u.entry_id) AS island
  FROM (SELECT DISTINCT mixture_id, entry_id FROM mixture_positions) AS u
  JOIN base_entries AS b ON b.id = u.entry_id
) AS i GROUP BY mixture_id, dataset_id, island
"""
_ROW_TIMES = """
CREATE TEMPORARY TABLE row_times AS
SELECT p.mixture_id AS mixture_id, b.dataset_id AS dataset_id, b.row AS row, count(*) AS times
FROM mixture_positions AS p JOIN base_entries AS b ON b.id = p.entry_id
GROUP BY p.mixture_id, b.dataset_id, b.row
"""
_REPEAT_COUNTS = """
INSERT INTO repeat_counts (mixture_id, dataset_id, times, rows)
SELECT mixture_id, dataset_id, times, count(*) FROM row_times GROUP BY mixture_id, dataset_id, times
"""
_REPEATS = f"""
INSERT INTO repeat_rows (mixture_id, dataset_id, times, row)
SELECT mixture_id, dataset_id, times, row FROM (
  SELECT mixture_id, dataset_id, times, row,
         row_number() OVER (PARTITION BY mixture_id, dataset_id, times ORDER BY row) AS k
  FROM row_times
) AS r WHERE k <= {_REPEAT_ROWS}
"""

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


def upgrade() -> None:
    _table("dataset_turns", (("dataset_id", "datasets"), ("turns", "")), ("rows",))
    _table("mixture_spans", (("mixture_id", "mixtures"), ("first_entry", "")), ("entries",))
    _table("repeat_counts", (("mixture_id", "mixtures"), ("dataset_id", "datasets"), ("times", "")), ("rows",))
    _table("render_statuses", (("spec_id", "render_specs"), ("dataset_id", "datasets"), ("status", "")),
           ("entries", "longest"), text=("status",))
    _table("render_blocks", (("spec_id", "render_specs"), ("block", ""), ("dataset_id", "datasets")),
           ("entries", "tokens", "supervised_tokens"))
    _table("repeat_rows", (("mixture_id", "mixtures"), ("dataset_id", "datasets"), ("times", ""), ("row", "")), ())
    op.execute(_TURNS)
    op.execute(_SPANS)
    op.execute(_ROW_TIMES)
    op.execute(_REPEAT_COUNTS)
    op.execute(_REPEATS)
    op.execute("DROP TABLE row_times")
    op.execute(_STATUSES)
    op.execute(_BLOCKS)


def downgrade() -> None:
    for table in ("render_blocks", "render_statuses", "repeat_rows", "repeat_counts", "mixture_spans", "dataset_turns"):
        op.drop_table(table)

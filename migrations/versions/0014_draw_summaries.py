"""Draw summaries: ``dataset_turns`` (a dataset's rows by their number of entries), and per
mixture ``mixture_spans`` (the base entries it uses, as ranges), ``repeat_counts`` (its rows by
the times it shows them) and ``repeat_rows`` (the first rows of each such level), written with
the base index and each mixture so that the cookbook reads them instead of every position.

Existing stores get them counted once from their positions: a pass over every position of every
mixture (minutes at 20M positions), which is what each cookbook query cost before.

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


def _key_table(name: str, *columns: tuple[str, str], value: str) -> None:
    """A WITHOUT ROWID table keyed by ``columns`` (name, referred table or '') with one value."""
    op.create_table(
        name,
        *(sa.Column(column, _INT, nullable=False) for column, _ in columns),
        sa.Column(value, _INT, nullable=False),
        *(sa.ForeignKeyConstraint([column], [f"{table}.id"], name=op.f(f"fk_{name}_{column}_{table}"))
          for column, table in columns if table),
        sa.PrimaryKeyConstraint(*(column for column, _ in columns), name=op.f(f"pk_{name}")),
        sqlite_with_rowid=False,
    )


def upgrade() -> None:
    _key_table("dataset_turns", ("dataset_id", "datasets"), ("turns", ""), value="rows")
    _key_table("mixture_spans", ("mixture_id", "mixtures"), ("first_entry", ""), value="entries")
    _key_table("repeat_counts", ("mixture_id", "mixtures"), ("dataset_id", "datasets"), ("times", ""), value="rows")
    op.create_table(
        "repeat_rows",
        *(sa.Column(column, _INT, nullable=False) for column in ("mixture_id", "dataset_id", "times", "row")),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_repeat_rows_mixture_id_mixtures")),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_repeat_rows_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("mixture_id", "dataset_id", "times", "row", name=op.f("pk_repeat_rows")),
        sqlite_with_rowid=False,
    )
    op.execute(_TURNS)
    op.execute(_SPANS)
    op.execute(_ROW_TIMES)
    op.execute(_REPEAT_COUNTS)
    op.execute(_REPEATS)
    op.execute("DROP TABLE row_times")


def downgrade() -> None:
    for table in ("repeat_rows", "repeat_counts", "mixture_spans", "dataset_turns"):
        op.drop_table(table)

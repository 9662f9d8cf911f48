"""Evidence about data: near duplicates (``dataidx dedup``) and benchmark leaks (``dataidx
decontaminate``), each run a named list of base entries with what it found per entry. Nothing
is deleted to record them; a list leaves its entries out only where a mixture is drawn with
``--exclude``, and removing the list restores them.

- ``evidence_runs``: one row per run: its name, kind (``near_duplicates`` or ``contamination``),
  its parameters as JSON (threshold, n-grams, bands, the MinHash library and version, the eval
  files and their sha256), entries flagged, when and how long.
- ``duplicate_entries``: per run, each entry of a duplicate row: the representative's entry it
  duplicates and the Jaccard of the two rows' word 5-grams, verified exactly.
- ``leak_entries``: per run, each entry that holds an eval item: the eval set, the item's index,
  the score (the longest span of the item found, over the item's words) and the span's words.
- views ``duplicates`` and ``contamination``: those rows with names, datasets, rows and cuts.
- ``mixtures.excludes``: the lists a mixture was drawn without (``dataidx mix --exclude``), as a
  JSON array of names; NULL for a mixture that excludes nothing.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
DUPLICATES_VIEW = """
CREATE VIEW duplicates AS
SELECT r.name AS run, d.name AS dataset, b."row" AS "row", b.cut AS cut, rd.name AS representative_dataset,
       rb."row" AS representative_row, rb.cut AS representative_cut, x.jaccard AS jaccard, x.entry_id AS entry_id,
       x.representative AS representative_entry
FROM duplicate_entries AS x
JOIN evidence_runs AS r ON r.id = x.run_id
JOIN base_entries AS b ON b.id = x.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
JOIN base_entries AS rb ON rb.id = x.representative
JOIN datasets AS rd ON rd.id = rb.dataset_id
"""
CONTAMINATION_VIEW = """
CREATE VIEW contamination AS
SELECT r.name AS run, d.name AS dataset, b."row" AS "row", b.cut AS cut, x.eval_set AS eval_set, x.item AS item,
       x.score AS score, x.span AS span, x.entry_id AS entry_id
FROM leak_entries AS x
JOIN evidence_runs AS r ON r.id = x.run_id
JOIN base_entries AS b ON b.id = x.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""


def upgrade() -> None:
    op.create_table(
        "evidence_runs",
        sa.Column("id", _INT, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("entries", _INT, nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evidence_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_evidence_runs_name")),
    )
    op.create_table(
        "duplicate_entries",
        sa.Column("run_id", _INT, nullable=False),
        sa.Column("entry_id", _INT, nullable=False),
        sa.Column("representative", _INT, nullable=False),
        sa.Column("jaccard", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["evidence_runs.id"],
                                name=op.f("fk_duplicate_entries_run_id_evidence_runs")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"],
                                name=op.f("fk_duplicate_entries_entry_id_base_entries")),
        sa.ForeignKeyConstraint(["representative"], ["base_entries.id"],
                                name=op.f("fk_duplicate_entries_representative_base_entries")),
        sa.PrimaryKeyConstraint("run_id", "entry_id", name=op.f("pk_duplicate_entries")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "leak_entries",
        sa.Column("run_id", _INT, nullable=False),
        sa.Column("entry_id", _INT, nullable=False),
        sa.Column("eval_set", sa.String(), nullable=False),
        sa.Column("item", _INT, nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("span", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["evidence_runs.id"], name=op.f("fk_leak_entries_run_id_evidence_runs")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_leak_entries_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("run_id", "entry_id", "eval_set", name=op.f("pk_leak_entries")),
        sqlite_with_rowid=False,
    )
    op.execute(DUPLICATES_VIEW)
    op.execute(CONTAMINATION_VIEW)
    op.add_column("mixtures", sa.Column("excludes", sa.Text(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE mixtures DROP COLUMN excludes")
    op.execute("DROP VIEW contamination")
    op.execute("DROP VIEW duplicates")
    op.drop_table("leak_entries")
    op.drop_table("duplicate_entries")
    op.drop_table("evidence_runs")

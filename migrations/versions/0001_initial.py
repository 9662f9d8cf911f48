"""The first store schema: datasets, base index, mixtures, and the entries/composition views.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ENTRIES_VIEW = """
CREATE VIEW entries AS
SELECT m.name AS mixture, me.id - m.start AS position, d.name AS dataset, b.row AS row, b.cut AS cut
FROM mixture_entries AS me
JOIN mixtures AS m ON m.id = me.mixture_id
JOIN base_entries AS b ON b.id = me.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""

COMPOSITION_VIEW = """
CREATE VIEW composition AS
SELECT m.name AS mixture, d.name AS dataset, count(*) AS entries,
       count(DISTINCT b.row) AS distinct_rows,
       round(CAST(count(*) AS REAL) / m.entries, 6) AS share
FROM mixture_entries AS me
JOIN mixtures AS m ON m.id = me.mixture_id
JOIN base_entries AS b ON b.id = me.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY m.id, d.id
ORDER BY m.id, d.position
"""


def upgrade() -> None:
    op.create_table(
        "builds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("config_origin", sa.Text(), nullable=False),
        sa.Column("config_text", sa.Text(), nullable=False),
        sa.Column("config_sha256", sa.String(length=64), nullable=False),
        sa.Column("dataidx_version", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_builds")),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("loader_version", sa.String(), nullable=False),
        sa.Column("split", sa.String(), nullable=False),
        sa.Column("converter", sa.String(), nullable=False),
        sa.Column("converter_version", sa.String(), nullable=False),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("first_entry", sa.Integer(), nullable=False),
        sa.Column("drops", sa.Integer(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("arrow_files", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("name", name=op.f("uq_datasets_name")),
    )
    op.create_table(
        "base_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("cut", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_base_entries_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_base_entries")),
    )
    op.create_table(
        "mixtures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("sampling", sa.String(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("config_sha256", sa.String(length=64), nullable=False),
        sa.Column("dataidx_version", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mixtures")),
        sa.UniqueConstraint("name", name=op.f("uq_mixtures_name")),
    )
    op.create_table(
        "mixture_datasets",
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=True),
        sa.Column("weight", sa.Float(), nullable=True),
        sa.Column("base_entries", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_mixture_datasets_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["mixture_id"], ["mixtures.id"], name=op.f("fk_mixture_datasets_mixture_id_mixtures")
        ),
        sa.PrimaryKeyConstraint("mixture_id", "dataset_id", name=op.f("pk_mixture_datasets")),
    )
    op.create_table(
        "mixture_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entry_id"], ["base_entries.id"], name=op.f("fk_mixture_entries_entry_id_base_entries")
        ),
        sa.ForeignKeyConstraint(
            ["mixture_id"], ["mixtures.id"], name=op.f("fk_mixture_entries_mixture_id_mixtures")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mixture_entries")),
    )
    op.execute(ENTRIES_VIEW)
    op.execute(COMPOSITION_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW composition")
    op.execute("DROP VIEW entries")
    for table in ("mixture_entries", "mixture_datasets", "mixtures", "base_entries", "datasets", "builds"):
        op.drop_table(table)

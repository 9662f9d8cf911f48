"""Mixture runs: a stretch of consecutive base entries stored as one row, not one row per position.

A dataset drawn whole (no size or weight), or each whole repeat of a grown one, is a run of
consecutive entry ids; storing it as ``(start, first_entry, length)`` halves what a build writes.
The ``mixture_positions`` view expands runs and explicit positions alike; the public views are
rebuilt on it with the same columns.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

POSITIONS_VIEW = """
CREATE VIEW mixture_positions AS
SELECT r.mixture_id AS mixture_id, r.start + (b.id - r.first_entry) AS id, b.id AS entry_id
FROM mixture_runs AS r
JOIN base_entries AS b ON b.id BETWEEN r.first_entry AND r.first_entry + r.length - 1
UNION ALL
SELECT mixture_id, id, entry_id FROM mixture_entries
"""

ENTRIES_VIEW = """
CREATE VIEW entries AS
SELECT m.name AS mixture, p.id - m.start AS position, d.name AS dataset, b.row AS row, b.cut AS cut
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""

COMPOSITION_VIEW = """
CREATE VIEW composition AS
SELECT m.name AS mixture, d.name AS dataset, count(*) AS entries,
       count(DISTINCT b.row) AS distinct_rows,
       round(CAST(count(*) AS REAL) / m.entries, 6) AS share
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY m.id, d.id
ORDER BY m.id, d.position
"""

REPEATS_VIEW = """
CREATE VIEW repeats AS
SELECT m.name AS mixture, d.name AS dataset, b.row AS row, b.cut AS cut, count(*) AS repeats
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY p.mixture_id, p.entry_id
"""

OLD_VIEWS = {
    "entries": """
CREATE VIEW entries AS
SELECT m.name AS mixture, me.id - m.start AS position, d.name AS dataset, b.row AS row, b.cut AS cut
FROM mixture_entries AS me
JOIN mixtures AS m ON m.id = me.mixture_id
JOIN base_entries AS b ON b.id = me.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
""",
    "composition": """
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
""",
    "repeats": """
CREATE VIEW repeats AS
SELECT m.name AS mixture, d.name AS dataset, b.row AS row, b.cut AS cut, count(*) AS repeats
FROM mixture_entries AS me
JOIN mixtures AS m ON m.id = me.mixture_id
JOIN base_entries AS b ON b.id = me.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY me.mixture_id, me.entry_id
""",
}


def upgrade() -> None:
    op.create_table(
        "mixture_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("first_entry", sa.Integer(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_mixture_runs_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mixture_runs")),
    )
    for view in ("entries", "composition", "repeats"):
        op.execute(f"DROP VIEW {view}")
    for statement in (POSITIONS_VIEW, ENTRIES_VIEW, COMPOSITION_VIEW, REPEATS_VIEW):
        op.execute(statement)


def downgrade() -> None:
    # Runs become explicit positions again, so the older views keep seeing every entry.
    op.execute(
        "INSERT INTO mixture_entries (id, mixture_id, entry_id) "
        "SELECT id, mixture_id, entry_id FROM mixture_positions WHERE id NOT IN (SELECT id FROM mixture_entries)"
    )
    for view in ("repeats", "composition", "entries", "mixture_positions"):
        op.execute(f"DROP VIEW {view}")
    for statement in OLD_VIEWS.values():
        op.execute(statement)
    op.drop_table("mixture_runs")

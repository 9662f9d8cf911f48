"""What each dataset contributes to a mixture, counted once when the mixture is written.

``mixture_datasets`` gains ``distinct_entries``, ``distinct_rows`` and ``max_repeats``, so the
``composition`` view and ``dataidx compose`` read a row per dataset instead of expanding every
position of a mixture (seconds at millions of entries). Existing mixtures are counted from their
positions here, once. ``dataidx verify`` recounts them.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COMPOSITION_VIEW = """
CREATE VIEW composition AS
SELECT m.name AS mixture, d.name AS dataset, md.entries AS entries, md.distinct_rows AS distinct_rows,
       round(CAST(md.entries AS REAL) / m.entries, 6) AS share
FROM mixture_datasets AS md
JOIN mixtures AS m ON m.id = md.mixture_id
JOIN datasets AS d ON d.id = md.dataset_id
WHERE md.entries > 0
ORDER BY m.id, d.position
"""

OLD_COMPOSITION_VIEW = """
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

# Per (mixture, dataset): distinct entries, distinct rows and the largest repeat count.
COUNTS = """
WITH per_entry AS (
    SELECT p.mixture_id, p.entry_id, count(*) AS n FROM mixture_positions AS p GROUP BY p.mixture_id, p.entry_id
)
SELECT e.mixture_id, b.dataset_id, count(*), count(DISTINCT b.row), max(e.n)
FROM per_entry AS e JOIN base_entries AS b ON b.id = e.entry_id
GROUP BY e.mixture_id, b.dataset_id
"""


def upgrade() -> None:
    for column in ("distinct_entries", "distinct_rows", "max_repeats"):
        op.add_column("mixture_datasets", sa.Column(column, sa.Integer(), nullable=False, server_default="0"))
    connection = op.get_bind()
    for mixture_id, dataset_id, entries, rows, repeats in connection.exec_driver_sql(COUNTS).fetchall():
        connection.exec_driver_sql(
            "UPDATE mixture_datasets SET distinct_entries = ?, distinct_rows = ?, max_repeats = ? "
            "WHERE mixture_id = ? AND dataset_id = ?", (entries, rows, repeats, mixture_id, dataset_id))
    op.execute("DROP VIEW composition")
    op.execute(COMPOSITION_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW composition")
    op.execute(OLD_COMPOSITION_VIEW)
    with op.batch_alter_table("mixture_datasets") as batch:
        for column in ("max_repeats", "distinct_rows", "distinct_entries"):
            batch.drop_column(column)

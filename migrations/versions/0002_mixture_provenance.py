"""Mixture provenance and composition views: config text, requested counts, turns, repeats.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TURNS_VIEW = """
CREATE VIEW turns AS
SELECT d.name AS dataset, b.row AS row, count(*) AS entries, max(b.cut) AS last_cut
FROM base_entries AS b
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY b.dataset_id, b.row
"""

REPEATS_VIEW = """
CREATE VIEW repeats AS
SELECT m.name AS mixture, d.name AS dataset, b.row AS row, b.cut AS cut, count(*) AS repeats
FROM mixture_entries AS me
JOIN mixtures AS m ON m.id = me.mixture_id
JOIN base_entries AS b ON b.id = me.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY me.mixture_id, me.entry_id
"""


def upgrade() -> None:
    # Plain ADD COLUMN: SQLite does it in place, and batch mode's table copy would trip the views.
    op.add_column("mixtures", sa.Column("config_text", sa.Text(), nullable=False, server_default=""))
    op.add_column("mixture_datasets", sa.Column("requested", sa.Integer(), nullable=True))
    op.execute(TURNS_VIEW)
    op.execute(REPEATS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW repeats")
    op.execute("DROP VIEW turns")
    op.drop_column("mixture_datasets", "requested")
    op.drop_column("mixtures", "config_text")

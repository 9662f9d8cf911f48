"""Rows a build rejected under ``on_error: skip``, with their reasons, and the rejects view.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

REJECTS_VIEW = """
CREATE VIEW rejects AS
SELECT d.name AS dataset, r.row AS row, r.reason AS reason
FROM rejected_rows AS r
JOIN datasets AS d ON d.id = r.dataset_id
ORDER BY d.position, r.row
"""


def upgrade() -> None:
    op.create_table(
        "rejected_rows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_rejected_rows_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rejected_rows")),
    )
    op.add_column("datasets", sa.Column("rejected", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("datasets", sa.Column("on_error", sa.String(), nullable=False, server_default="raise"))
    op.execute(REJECTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW rejects")
    op.drop_column("datasets", "on_error")
    op.drop_column("datasets", "rejected")
    op.drop_table("rejected_rows")

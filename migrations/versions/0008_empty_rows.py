"""Rows that train nothing, counted per dataset by the build.

``datasets.empty_rows`` counts the rows whose sample has no supervised turn and no preference
pair (a build refuses a dataset made almost only of them, unless it says ``allow_empty``).
Stores built before leave it NULL: unknown, since counting needs the converter run again.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("datasets", sa.Column("empty_rows", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("datasets", "empty_rows")

"""Cut merges: a packing plan may train a conversation's cuts as one sequence (``dataidx pack
--merge-cuts``): ``packing_plans.merge_cuts`` says how (``no``, ``chains`` or ``trees``), a
member ``joined`` to the next is a cut of the same sequence, and ``plan_merges`` (the view
``cut_merges``) counts per epoch the conversations merged and why the others stayed cuts.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")

_VIEW = """
CREATE VIEW cut_merges AS
SELECT p.name AS plan, g.epoch AS epoch, g.outcome AS outcome, g.rows AS rows, g.entries AS entries,
       g.cut_tokens AS cut_tokens, g.tokens AS tokens
FROM plan_merges AS g
JOIN packing_plans AS p ON p.id = g.plan_id
"""


def upgrade() -> None:
    # Plain ADD COLUMN with a default: a constant-time change on SQLite, whatever the plans hold.
    op.add_column("packing_plans", sa.Column("merge_cuts", sa.String(), server_default="no", nullable=False))
    op.add_column("packed_entries", sa.Column("joined", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        "plan_merges",
        sa.Column("plan_id", _INT, nullable=False),
        sa.Column("epoch", _INT, nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("rows", _INT, nullable=False),
        sa.Column("entries", _INT, nullable=False),
        sa.Column("cut_tokens", _INT, nullable=False),
        sa.Column("tokens", _INT, nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["packing_plans.id"], name=op.f("fk_plan_merges_plan_id_packing_plans")),
        sa.PrimaryKeyConstraint("plan_id", "epoch", "outcome", name=op.f("pk_plan_merges")),
    )
    op.execute(_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW cut_merges")
    op.drop_table("plan_merges")
    op.drop_column("packed_entries", "joined")
    op.drop_column("packing_plans", "merge_cuts")

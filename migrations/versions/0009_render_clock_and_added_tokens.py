"""What a render spec fixes beyond tokenizer and template: its clock and which tokens it escapes,
and the added tokens found in each dataset's text.

``render_specs.clock`` is the time ``strftime_now`` reads in the spec's template (ISO 8601, fixed
when the spec is first rendered and reused by every later render and reader of it), so a template
that writes "Today Date" renders the same ids on any day. Specs stored before leave it NULL:
readers of a spec whose template reads the clock refuse it until it is rendered again.

``render_specs.escapes`` says which tokens data text may not produce as ids: ``special`` (v1's:
the added tokens marked special and the named special tokens) or ``added`` (every added token).

``added_token_uses`` counts, per spec and dataset, the entries whose data text holds an added
token that is not special (Qwen's ``<tool_call>``, ``<think>``): v1 trains them as their ids.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("render_specs", sa.Column("clock", sa.String(), nullable=True))
    op.add_column("render_specs", sa.Column("escapes", sa.String(), nullable=False, server_default="special"))
    op.create_table(
        "added_token_uses",
        sa.Column("spec_id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"],
                                name=op.f("fk_added_token_uses_spec_id_render_specs")),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_added_token_uses_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("spec_id", "dataset_id", "token", name=op.f("pk_added_token_uses")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("added_token_uses")
    # Not a batch (a copy of the table), which the views on render_specs would stop: both
    # databases drop a column no view reads in place (SQLite since 3.35).
    op.execute("ALTER TABLE render_specs DROP COLUMN escapes")
    op.execute("ALTER TABLE render_specs DROP COLUMN clock")

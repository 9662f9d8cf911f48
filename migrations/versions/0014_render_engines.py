"""The engines a render spec wrote its chat text and tokenized it with.

``render_specs.template_engine`` is ``jinja2`` (Hugging Face's environment, in dataidx's sandbox)
or ``minijinja``; ``render_specs.tokenizer_engine`` is ``hf`` (the model's ``tokenizers``
backend) or ``gigatoken``. A fast engine is recorded only where ``dataidx render`` found it gives
the exact engines' output on a seeded sample of the store's entries, and it is part of the
spec's fingerprint. Specs stored before say ``jinja2`` and ``hf``, which is what rendered them.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("render_specs", sa.Column("template_engine", sa.String(), nullable=False, server_default="jinja2"))
    op.add_column("render_specs", sa.Column("tokenizer_engine", sa.String(), nullable=False, server_default="hf"))


def downgrade() -> None:
    # In place, as 0009 drops its columns: a copy of the table would stop the views on render_specs.
    op.execute("ALTER TABLE render_specs DROP COLUMN tokenizer_engine")
    op.execute("ALTER TABLE render_specs DROP COLUMN template_engine")

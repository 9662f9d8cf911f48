"""What LLaMA-Factory v1 keeps beside a rendering: an entry's ``extra_info``, and whether the
spec's tokenizer ran code from its model folder.

- ``entry_renders.extra_info``: the sample's ``extra_info`` (v1's ``SFTSample``/``DPOSample``
  key, a string such as a KTO label), stored with the entry's tokens so a reader serving stored
  tokens gives it as v1's ``Renderer.process_samples`` does, without reading the source row.
  NULL: the sample has none (or no tokens are stored).
- ``render_specs.trust_remote_code``: 1 when the tokenizer was loaded with
  ``--trust-remote-code`` (a tokenizer class from Python files in its folder); a later load of
  that spec's tokenizer must be allowed the same way, and ``info``/``verify`` name it.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("entry_renders", sa.Column("extra_info", sa.Text(), nullable=True))
    op.add_column("render_specs", sa.Column("trust_remote_code", sa.Boolean(), nullable=False,
                                            server_default=sa.false()))


def downgrade() -> None:
    op.execute("ALTER TABLE render_specs DROP COLUMN trust_remote_code")
    op.execute("ALTER TABLE entry_renders DROP COLUMN extra_info")

"""Tokens stored once per render spec: where each entry's words lie in the spec's token file.

``dataidx render --store-tokens`` writes every training entry's ids, with the supervised bit in
each word, to one token file per spec, named by the spec's fingerprint (``spec_tokens`` says
which file, its size and digest). ``entry_renders`` gains, per entry that trains:

- ``token_offset``: the first word of the entry in the file (NULL: no tokens stored);
- ``side_tokens``: for a preference pair, the words of its chosen side (the rejected follow);
- ``token_weights``: the loss weight of every token as runs of equal weight (little-endian
  ``uint32`` count, ``float64`` weight), NULL when supervised tokens weigh 1 and the rest 0.

The view ``token_files`` shows, per spec, the tokens on disk and the bytes per token.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")

_VIEW = """
CREATE VIEW token_files AS
SELECT s.name AS spec, t.file AS file, t.folder AS folder, t.entries AS entries, t.tokens AS tokens,
       t.word_bytes AS word_bytes, t.bytes AS bytes,
       CAST(t.bytes AS DOUBLE PRECISION) / NULLIF(t.tokens, 0) AS bytes_per_token,
       t.sha256 AS sha256, t.created_at AS created_at
FROM spec_tokens AS t
JOIN render_specs AS s ON s.id = t.spec_id
"""


def upgrade() -> None:
    op.add_column("entry_renders", sa.Column("token_offset", _INT, nullable=True))
    op.add_column("entry_renders", sa.Column("side_tokens", _INT, nullable=True))
    op.add_column("entry_renders", sa.Column("token_weights", sa.LargeBinary(), nullable=True))
    op.create_table(
        "spec_tokens",
        sa.Column("spec_id", _INT, nullable=False),
        sa.Column("file", sa.String(), nullable=False),
        sa.Column("folder", sa.Text(), nullable=True),
        sa.Column("word_bytes", _INT, nullable=False),
        sa.Column("entries", _INT, nullable=False),
        sa.Column("tokens", _INT, nullable=False),
        sa.Column("bytes", _INT, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"], name=op.f("fk_spec_tokens_spec_id_render_specs")),
        sa.PrimaryKeyConstraint("spec_id", name=op.f("pk_spec_tokens")),
    )
    op.execute(_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW token_files")
    op.drop_table("spec_tokens")
    # In place, as 0010's downgrade: both databases drop a column no view reads.
    for column in ("token_weights", "side_tokens", "token_offset"):
        op.execute(f"ALTER TABLE entry_renders DROP COLUMN {column}")

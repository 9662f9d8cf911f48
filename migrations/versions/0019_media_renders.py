"""Multimodal render specs: the processor a spec rendered media with, what proved its header
counts, and every media file's tokens and grid under the spec.

- ``render_specs.processor``: the image processor's settings as JSON (what its token counts
  depend on; part of the fingerprint), for a spec rendered with a model folder's processor;
  NULL for a text spec (media written as text placeholders, as before).
- ``render_specs.media_proof``: what was decoded at the spec's creation to prove that counting
  from headers gives the processor's grids (NULL: no processor).
- ``media_renders``: per spec and media file, its placeholder tokens and what they come from: an
  image's grid (``grid_t``, ``grid_h``, ``grid_w``), an audio's feature ``frames`` (NULL where it
  does not apply); the same file has a count per processor.
- view ``media_tokens``: those rows with the spec's name and the file's path and kind.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
MEDIA_TOKENS_VIEW = """
CREATE VIEW media_tokens AS
SELECT s.name AS spec, r.media_id AS media_id, f.kind AS kind, f.path AS path, f.width AS width, f.height AS height,
       r.tokens AS tokens, r.grid_t AS grid_t, r.grid_h AS grid_h, r.grid_w AS grid_w, r.frames AS frames
FROM media_renders AS r
JOIN render_specs AS s ON s.id = r.spec_id
JOIN media_files AS f ON f.id = r.media_id
"""


def upgrade() -> None:
    op.add_column("render_specs", sa.Column("processor", sa.Text(), nullable=True))
    op.add_column("render_specs", sa.Column("media_proof", sa.Text(), nullable=True))
    op.create_table(
        "media_renders",
        sa.Column("spec_id", _INT, nullable=False),
        sa.Column("media_id", _INT, nullable=False),
        sa.Column("tokens", _INT, nullable=False),
        sa.Column("grid_t", _INT, nullable=True),
        sa.Column("grid_h", _INT, nullable=True),
        sa.Column("grid_w", _INT, nullable=True),
        sa.Column("frames", _INT, nullable=True),
        sa.ForeignKeyConstraint(["media_id"], ["media_files.id"], name=op.f("fk_media_renders_media_id_media_files")),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"], name=op.f("fk_media_renders_spec_id_render_specs")),
        sa.PrimaryKeyConstraint("spec_id", "media_id", name=op.f("pk_media_renders")),
        sqlite_with_rowid=False,
    )
    op.execute(MEDIA_TOKENS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW media_tokens")
    op.drop_table("media_renders")
    op.execute("ALTER TABLE render_specs DROP COLUMN media_proof")
    op.execute("ALTER TABLE render_specs DROP COLUMN processor")

"""Media are stored things: every distinct media file a build's rows name, with its size, mtime,
content digest and header (``media_files``), each row's media blocks in order (``row_media``),
and the views ``media`` (one row per file, with the rows and entries using it) and
``entry_media`` (a base entry's media in order: those of its messages below its cut).

``media_files.relative`` is the file's place relative to the store's folder (links resolved;
NULL in PostgreSQL or on another drive), as a source's is: a project folder moved or copied
whole reads its own media there first.

Stores built before this revision record no media; their rows are read as before (build again
to record them).

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
# An entry's media: the row's blocks in messages below its cut (all of them for an entry without one).
_ENTRY_JOIN = ("JOIN base_entries AS e ON e.id BETWEEN m.first_entry AND m.first_entry + m.entries - 1 "
               "AND (e.cut IS NULL OR m.message < e.cut)")
MEDIA_VIEW = f"""
CREATE VIEW media AS
SELECT f.id AS id, f.kind AS kind, f.path AS path, f.bytes AS bytes, f.xxh3_128 AS xxh3_128, f.format AS format,
       f.width AS width, f.height AS height, f.frames AS frames, f.fps AS fps, f.duration AS duration,
       f.samples AS samples, f.rate AS rate, f.channels AS channels,
       (SELECT count(DISTINCT m.first_entry) FROM row_media AS m WHERE m.media_id = f.id) AS rows,
       (SELECT count(DISTINCT e.id) FROM row_media AS m {_ENTRY_JOIN} WHERE m.media_id = f.id) AS entries
FROM media_files AS f
"""
ENTRY_MEDIA_VIEW = f"""
CREATE VIEW entry_media AS
SELECT d.name AS dataset, m.row AS row, e.cut AS cut, m.ordinal AS ordinal, m.message AS message,
       f.kind AS kind, m.written AS written, f.path AS path, m.media_id AS media_id
FROM row_media AS m
JOIN datasets AS d ON d.id = m.dataset_id
{_ENTRY_JOIN}
JOIN media_files AS f ON f.id = m.media_id
"""


def upgrade() -> None:
    op.create_table(
        "media_files",
        sa.Column("id", _INT, nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("bytes", _INT, nullable=False),
        sa.Column("mtime_ns", _INT, nullable=False),
        sa.Column("xxh3_128", sa.String(length=32), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("width", _INT, nullable=True),
        sa.Column("height", _INT, nullable=True),
        sa.Column("frames", _INT, nullable=True),
        sa.Column("fps", sa.Float(), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.Column("samples", _INT, nullable=True),
        sa.Column("rate", _INT, nullable=True),
        sa.Column("channels", _INT, nullable=True),
        sa.Column("relative", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_media_files")),
        sa.UniqueConstraint("path", name=op.f("uq_media_files_path")),
    )
    op.create_table(
        "row_media",
        sa.Column("dataset_id", _INT, nullable=False),
        sa.Column("row", _INT, nullable=False),
        sa.Column("ordinal", _INT, nullable=False),
        sa.Column("message", _INT, nullable=False),
        sa.Column("media_id", _INT, nullable=False),
        sa.Column("written", sa.Text(), nullable=False),
        sa.Column("first_entry", _INT, nullable=False),
        sa.Column("entries", _INT, nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_row_media_dataset_id_datasets")),
        sa.ForeignKeyConstraint(["media_id"], ["media_files.id"], name=op.f("fk_row_media_media_id_media_files")),
        sa.PrimaryKeyConstraint("dataset_id", "row", "ordinal", name=op.f("pk_row_media")),
        sqlite_with_rowid=False,
    )
    op.create_index(op.f("ix_row_media_media_id"), "row_media", ["media_id"], unique=False)
    op.execute(MEDIA_VIEW)
    op.execute(ENTRY_MEDIA_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW entry_media")
    op.execute("DROP VIEW media")
    op.drop_index(op.f("ix_row_media_media_id"), table_name="row_media")
    op.drop_table("row_media")
    op.drop_table("media_files")

"""Exact duplicates, found at build: the 128-bit xxh3 of each entry's messages and of its prompt
side (``dataidx.convert.digests``), kept for the entries another entry shares one with.

- ``entry_digests``: per such entry, its messages' digest and its prompt side's (32 hex digits;
  NULL where it has no prompt side: a document, an entry without a supervised turn). An entry no
  other shares either digest with is not stored (16 bytes more per entry would double a store).
- view ``exact_duplicates``: the entries whose messages another shares, each with its group's
  digest, size and representative (its first entry, in the YAML's dataset order then row order).
- view ``same_prompts``: the entries whose prompt side another shares, with the group's count of
  distinct answers. The same prompt with another answer is data, not a duplicate: it is listed
  here and not in ``exact_duplicates``.

Stores built before this revision have no digests: the views are empty until they are built again.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
EXACT_DUPLICATES_VIEW = """
CREATE VIEW exact_duplicates AS
SELECT x.messages AS digest, d.name AS dataset, b."row" AS "row", b.cut AS cut, g.copies AS copies,
       rd.name AS representative_dataset, rb."row" AS representative_row, rb.cut AS representative_cut,
       x.entry_id AS entry_id, g.representative AS representative_entry
FROM entry_digests AS x
JOIN (SELECT messages, count(*) AS copies, min(entry_id) AS representative FROM entry_digests
      GROUP BY messages HAVING count(*) > 1) AS g ON g.messages = x.messages
JOIN base_entries AS b ON b.id = x.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
JOIN base_entries AS rb ON rb.id = g.representative
JOIN datasets AS rd ON rd.id = rb.dataset_id
"""
SAME_PROMPTS_VIEW = """
CREATE VIEW same_prompts AS
SELECT x.prompt AS digest, d.name AS dataset, b."row" AS "row", b.cut AS cut, g.entries AS entries,
       g.answers AS answers, x.messages AS messages, x.entry_id AS entry_id
FROM entry_digests AS x
JOIN (SELECT prompt, count(*) AS entries, count(DISTINCT messages) AS answers FROM entry_digests
      WHERE prompt IS NOT NULL GROUP BY prompt HAVING count(*) > 1) AS g ON g.prompt = x.prompt
JOIN base_entries AS b ON b.id = x.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""


def upgrade() -> None:
    op.create_table(
        "entry_digests",
        sa.Column("entry_id", _INT, nullable=False),
        sa.Column("messages", sa.String(), nullable=False),
        sa.Column("prompt", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_entry_digests_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("entry_id", name=op.f("pk_entry_digests")),
        sqlite_with_rowid=False,
    )
    op.execute(EXACT_DUPLICATES_VIEW)
    op.execute(SAME_PROMPTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW same_prompts")
    op.execute("DROP VIEW exact_duplicates")
    op.drop_table("entry_digests")

"""Skip-lists: entries a mixture's training orders leave out, with who asked and why.

``dataidx skip`` stores a named list per mixture (``skip_lists``: who, why, what was asked, when)
and its base entries (``skipped_entries``); a run's ``OrderSampler`` reads the mixture's order
without every position that holds one of them. The view ``skips`` names each skipped entry.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")

_VIEW = """
CREATE VIEW skips AS
SELECT m.name AS mixture, l.name AS skip_list, d.name AS dataset, b.row AS row, b.cut AS cut, l.who AS who,
       l.why AS why, l.request AS request, l.created_at AS created_at
FROM skipped_entries AS s
JOIN skip_lists AS l ON l.id = s.skip_list_id
JOIN mixtures AS m ON m.id = l.mixture_id
JOIN base_entries AS b ON b.id = s.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""


def upgrade() -> None:
    op.create_table(
        "skip_lists",
        sa.Column("id", _INT, nullable=False),
        sa.Column("mixture_id", _INT, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("who", sa.String(), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("entries", _INT, nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_skip_lists_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_skip_lists")),
        sa.UniqueConstraint("mixture_id", "name", name=op.f("uq_skip_lists_mixture_id")),
    )
    op.create_table(
        "skipped_entries",
        sa.Column("skip_list_id", _INT, nullable=False),
        sa.Column("entry_id", _INT, nullable=False),
        sa.ForeignKeyConstraint(["skip_list_id"], ["skip_lists.id"],
                                name=op.f("fk_skipped_entries_skip_list_id_skip_lists")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"],
                                name=op.f("fk_skipped_entries_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("skip_list_id", "entry_id", name=op.f("pk_skipped_entries")),
    )
    op.execute(_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW skips")
    op.drop_table("skipped_entries")
    op.drop_table("skip_lists")

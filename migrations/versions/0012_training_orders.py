"""Training orders: skip lists (entries a mixture's orders leave out, with who asked and why) and
recorded orders (a run's seed, global batch and tail, with what each epoch's tail trimmed).

``dataidx skip`` stores a named list per mixture (``skip_lists``: who, why, what was asked, when)
and its base entries (``skipped_entries``); a run's ``OrderSampler`` reads the mixture's order
without every position that holds one of them. The view ``skips`` names each skipped entry.
``dataidx order`` records a run's order (``training_orders``) and the entries the tail of each
stored epoch leaves out (``order_trims``; the view ``trimmed``); with ``--store-steps``, every
entry of every step too (``order_items``; the view ``order_steps``).

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


_TRIMMED = """
CREATE VIEW trimmed AS
SELECT o.name AS "order", m.name AS mixture, t.epoch AS epoch, d.name AS dataset, b.row AS row, b.cut AS cut,
       o.global_batch_size AS global_batch_size, o.seed AS seed
FROM order_trims AS t
JOIN training_orders AS o ON o.id = t.order_id
JOIN mixtures AS m ON m.id = o.mixture_id
JOIN base_entries AS b ON b.id = t.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""


_STEPS = """
CREATE VIEW order_steps AS
SELECT o.name AS "order", i.epoch AS epoch, i.step AS step, i.item AS item, d.name AS dataset, b.row AS row,
       b.cut AS cut
FROM order_items AS i
JOIN training_orders AS o ON o.id = i.order_id
JOIN base_entries AS b ON b.id = i.entry_id
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
    op.create_table(
        "training_orders",
        sa.Column("id", _INT, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("mixture_id", _INT, nullable=False),
        sa.Column("reads", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=True),
        sa.Column("seed", _INT, nullable=True),
        sa.Column("global_batch_size", _INT, nullable=False),
        sa.Column("tail", sa.String(), nullable=False),
        sa.Column("skips", sa.Boolean(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_training_orders_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_orders")),
        sa.UniqueConstraint("name", name=op.f("uq_training_orders_name")),
    )
    op.create_table(
        "order_trims",
        sa.Column("order_id", _INT, nullable=False),
        sa.Column("epoch", _INT, nullable=False),
        sa.Column("entry_id", _INT, nullable=False),
        sa.ForeignKeyConstraint(["order_id"], ["training_orders.id"],
                                name=op.f("fk_order_trims_order_id_training_orders")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_order_trims_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("order_id", "epoch", "entry_id", name=op.f("pk_order_trims")),
    )
    op.execute(_TRIMMED)
    op.create_table(
        "order_items",
        sa.Column("id", _INT, nullable=False),
        sa.Column("order_id", _INT, nullable=False),
        sa.Column("epoch", _INT, nullable=False),
        sa.Column("step", _INT, nullable=False),
        sa.Column("item", _INT, nullable=False),
        sa.Column("entry_id", _INT, nullable=False),
        sa.ForeignKeyConstraint(["order_id"], ["training_orders.id"],
                                name=op.f("fk_order_items_order_id_training_orders")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_order_items_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_order_items")),
    )
    op.create_index("ix_order_items_step", "order_items", ["order_id", "epoch", "step"])
    op.execute(_STEPS)


def downgrade() -> None:
    op.execute("DROP VIEW order_steps")
    op.drop_index("ix_order_items_step", "order_items")
    op.drop_table("order_items")
    op.execute("DROP VIEW trimmed")
    op.drop_table("order_trims")
    op.drop_table("training_orders")
    op.execute("DROP VIEW skips")
    op.drop_table("skipped_entries")
    op.drop_table("skip_lists")

"""Token budgets and epochs: a mixture stores several epochs, each drawn with its own seed.

``mixture_epochs`` holds each epoch's seed and stretch of positions (a mixture's ``start`` and
``entries`` now cover all of them), ``epoch_datasets`` each dataset's draw per epoch with, under
the mixture's render spec, the entries that train and their tokens. ``mixture_datasets`` records
token budgets, ``mixtures`` the spec they were drawn by, ``plan_epochs`` the packs of each epoch
of a plan. The ``entries`` and ``pack_members`` views gain an ``epoch`` column; the new
``token_composition`` view reads tokens per dataset and epoch. Existing mixtures and plans
become one epoch, epoch 0.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ENTRIES_VIEW = """
CREATE VIEW entries AS
SELECT m.name AS mixture, p.id - e.start AS position, d.name AS dataset, b.row AS row, b.cut AS cut,
       e.epoch AS epoch
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN mixture_epochs AS e ON e.mixture_id = p.mixture_id AND p.id BETWEEN e.start AND e.start + e.entries - 1
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""

OLD_ENTRIES_VIEW = """
CREATE VIEW entries AS
SELECT m.name AS mixture, p.id - m.start AS position, d.name AS dataset, b.row AS row, b.cut AS cut
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""

PACK_MEMBERS_VIEW = """
CREATE VIEW pack_members AS
SELECT p.name AS plan, k.pack - pe.first_pack AS pack, e.id - k.first_member AS slot, e.position AS position,
       r.tokens AS tokens, pe.epoch AS epoch
FROM packs AS k
JOIN packing_plans AS p ON p.id = k.plan_id
JOIN plan_epochs AS pe ON pe.plan_id = k.plan_id AND k.pack BETWEEN pe.first_pack AND pe.first_pack + pe.packs - 1
JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1
JOIN entry_renders AS r ON r.spec_id = p.spec_id AND r.entry_id = e.entry_id
"""

OLD_PACK_MEMBERS_VIEW = """
CREATE VIEW pack_members AS
SELECT p.name AS plan, k.pack AS pack, e.id - k.first_member AS slot, e.position AS position, r.tokens AS tokens
FROM packs AS k
JOIN packing_plans AS p ON p.id = k.plan_id
JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1
JOIN entry_renders AS r ON r.spec_id = p.spec_id AND r.entry_id = e.entry_id
"""

TOKEN_COMPOSITION_VIEW = """
CREATE VIEW token_composition AS
SELECT m.name AS mixture, ed.epoch AS epoch, d.name AS dataset, ed.training_entries AS entries, ed.tokens AS tokens,
       ed.supervised_tokens AS supervised_tokens,
       round(CAST(ed.tokens AS REAL) / nullif(t.tokens, 0), 6) AS share_of_tokens
FROM epoch_datasets AS ed
JOIN mixtures AS m ON m.id = ed.mixture_id
JOIN datasets AS d ON d.id = ed.dataset_id
JOIN (SELECT mixture_id, epoch, sum(tokens) AS tokens FROM epoch_datasets GROUP BY mixture_id, epoch) AS t
  ON t.mixture_id = ed.mixture_id AND t.epoch = ed.epoch
WHERE ed.tokens IS NOT NULL AND ed.entries > 0
ORDER BY m.id, ed.epoch, d.position
"""


def upgrade() -> None:
    op.add_column("mixtures", sa.Column("epochs", sa.Integer(), nullable=False, server_default="1"))
    op.add_column("mixtures", sa.Column("spec", sa.String(), nullable=True))
    op.add_column("mixtures", sa.Column("spec_fingerprint", sa.String(64), nullable=True))
    op.add_column("mixture_datasets", sa.Column("token_budget", sa.Integer(), nullable=True))
    op.add_column("mixture_datasets", sa.Column("supervised_token_budget", sa.Integer(), nullable=True))
    op.add_column("packing_plans", sa.Column("epochs", sa.Integer(), nullable=False, server_default="1"))
    op.create_table(
        "mixture_epochs",
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_mixture_epochs_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("mixture_id", "epoch", name=op.f("pk_mixture_epochs")),
    )
    op.create_table(
        "epoch_datasets",
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("distinct_entries", sa.Integer(), nullable=False),
        sa.Column("distinct_rows", sa.Integer(), nullable=False),
        sa.Column("max_repeats", sa.Integer(), nullable=False),
        sa.Column("training_entries", sa.Integer(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=True),
        sa.Column("supervised_tokens", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_epoch_datasets_dataset_id_datasets")),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_epoch_datasets_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("mixture_id", "epoch", "dataset_id", name=op.f("pk_epoch_datasets")),
    )
    op.create_table(
        "plan_epochs",
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("first_pack", sa.Integer(), nullable=False),
        sa.Column("packs", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("fill", sa.Float(), nullable=False),
        sa.Column("left_out", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["packing_plans.id"], name=op.f("fk_plan_epochs_plan_id_packing_plans")),
        sa.PrimaryKeyConstraint("plan_id", "epoch", name=op.f("pk_plan_epochs")),
    )
    op.execute("INSERT INTO mixture_epochs (mixture_id, epoch, seed, start, entries) "
               "SELECT id, 0, seed, start, entries FROM mixtures")
    op.execute("INSERT INTO epoch_datasets (mixture_id, epoch, dataset_id, seed, entries, distinct_entries, "
               "distinct_rows, max_repeats) SELECT mixture_id, 0, dataset_id, seed, entries, distinct_entries, "
               "distinct_rows, max_repeats FROM mixture_datasets")
    op.execute("INSERT INTO plan_epochs (plan_id, epoch, seed, first_pack, packs, entries, tokens, fill, left_out) "
               "SELECT id, 0, seed, 0, packs, entries, tokens, fill, left_out FROM packing_plans")
    for view in ("entries", "pack_members"):
        op.execute(f"DROP VIEW {view}")
    for statement in (ENTRIES_VIEW, PACK_MEMBERS_VIEW, TOKEN_COMPOSITION_VIEW):
        op.execute(statement)


def downgrade() -> None:
    # Only epoch 0 of each mixture and plan has a meaning to revision 0006.
    for view in ("token_composition", "pack_members", "entries"):
        op.execute(f"DROP VIEW {view}")
    op.execute(OLD_ENTRIES_VIEW)
    op.execute(OLD_PACK_MEMBERS_VIEW)
    for table in ("plan_epochs", "epoch_datasets", "mixture_epochs"):
        op.drop_table(table)
    # A batch rebuild renames a new table into place; views that name the table (pack_plans,
    # composition...) read the same table afterwards, so SQLite need not re-check them then.
    op.execute("PRAGMA legacy_alter_table = ON")
    with op.batch_alter_table("packing_plans") as batch:
        batch.drop_column("epochs")
    with op.batch_alter_table("mixture_datasets") as batch:
        batch.drop_column("supervised_token_budget")
        batch.drop_column("token_budget")
    with op.batch_alter_table("mixtures") as batch:
        for column in ("spec_fingerprint", "spec", "epochs"):
            batch.drop_column(column)
    op.execute("PRAGMA legacy_alter_table = OFF")

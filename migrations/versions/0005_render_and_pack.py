"""Render specs with per-entry token lengths and statuses, packing plans with their members.

``render_specs`` records how entries were rendered (tokenizer fingerprint, template text, cutoff,
truncation); ``entry_renders`` holds, per spec and base entry, the token counts and a status
saying whether the entry trains and if not why. ``packing_plans`` and ``packed_entries`` store
best-fit-decreasing packs of a mixture's positions. Views: entry_lengths, pack_plans,
pack_members.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ENTRY_LENGTHS_VIEW = """
CREATE VIEW entry_lengths AS
SELECT s.name AS spec, d.name AS dataset, b.row AS row, b.cut AS cut, r.tokens AS tokens,
       r.supervised_tokens AS supervised_tokens, r.status AS status, r.full_tokens AS full_tokens,
       r.detail AS detail
FROM entry_renders AS r
JOIN render_specs AS s ON s.id = r.spec_id
JOIN base_entries AS b ON b.id = r.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""

PACK_PLANS_VIEW = """
CREATE VIEW pack_plans AS
SELECT p.name AS plan, s.name AS spec, m.name AS mixture, p.capacity AS capacity, p.seed AS seed,
       p.packs AS packs, p.entries AS entries, p.fill AS fill, p.tokens AS tokens, p.left_out AS left_out
FROM packing_plans AS p
JOIN render_specs AS s ON s.id = p.spec_id
JOIN mixtures AS m ON m.id = p.mixture_id
"""

PACK_MEMBERS_VIEW = """
CREATE VIEW pack_members AS
SELECT p.name AS plan, e.pack AS pack, e.slot AS slot, e.position AS position, e.tokens AS tokens
FROM packed_entries AS e
JOIN packing_plans AS p ON p.id = e.plan_id
"""


def upgrade() -> None:
    op.create_table(
        "render_specs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("tokenizer", sa.Text(), nullable=False),
        sa.Column("tokenizer_sha256", sa.String(64), nullable=False),
        sa.Column("template", sa.String(), nullable=False),
        sa.Column("template_text", sa.Text(), nullable=False),
        sa.Column("cutoff", sa.Integer(), nullable=False),
        sa.Column("truncation", sa.String(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("kept", sa.Integer(), nullable=False),
        sa.Column("dataidx_version", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_render_specs")),
        sa.UniqueConstraint("name", name=op.f("uq_render_specs_name")),
    )
    op.create_table(
        "entry_renders",
        sa.Column("spec_id", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("supervised_tokens", sa.Integer(), nullable=False),
        sa.Column("full_tokens", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"], name=op.f("fk_entry_renders_spec_id_render_specs")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_entry_renders_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("spec_id", "entry_id", name=op.f("pk_entry_renders")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "packing_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("spec_id", sa.Integer(), nullable=False),
        sa.Column("mixture_id", sa.Integer(), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("packs", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("fill", sa.Float(), nullable=False),
        sa.Column("left_out", sa.Integer(), nullable=False),
        sa.Column("dataidx_version", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"], name=op.f("fk_packing_plans_spec_id_render_specs")),
        sa.ForeignKeyConstraint(["mixture_id"], ["mixtures.id"], name=op.f("fk_packing_plans_mixture_id_mixtures")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_packing_plans")),
        sa.UniqueConstraint("name", name=op.f("uq_packing_plans_name")),
    )
    op.create_table(
        "packed_entries",
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("pack", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["packing_plans.id"], name=op.f("fk_packed_entries_plan_id_packing_plans")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"], name=op.f("fk_packed_entries_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("plan_id", "pack", "slot", name=op.f("pk_packed_entries")),
        sqlite_with_rowid=False,
    )
    for statement in (ENTRY_LENGTHS_VIEW, PACK_PLANS_VIEW, PACK_MEMBERS_VIEW):
        op.execute(statement)


def downgrade() -> None:
    for view in ("pack_members", "pack_plans", "entry_lengths"):
        op.execute(f"DROP VIEW {view}")
    for table in ("packed_entries", "packing_plans", "entry_renders", "render_specs"):
        op.drop_table(table)

"""Render specs with per-entry token lengths and statuses, packing plans with their members.

``render_specs`` records how entries were rendered (tokenizer fingerprint, template text, cutoff,
truncation); ``entry_renders`` holds, per spec and base entry, the token counts and a status
saying whether the entry trains and if not why. ``packing_plans`` holds best-fit-decreasing
plans of a mixture's positions: each of its ``packs`` owns the consecutive rowids
``first_member ..`` of ``packed_entries``, so writing a plan is a bulk append and reading a pack
one rowid range, as with mixture positions. Views: entry_lengths, pack_plans,
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
SELECT p.name AS plan, k.pack AS pack, e.id - k.first_member AS slot, e.position AS position, r.tokens AS tokens
FROM packs AS k
JOIN packing_plans AS p ON p.id = k.plan_id
JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1
JOIN entry_renders AS r ON r.spec_id = p.spec_id AND r.entry_id = e.entry_id
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
        "packs",
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("pack", sa.Integer(), nullable=False),
        sa.Column("first_member", sa.Integer(), nullable=False),
        sa.Column("members", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["packing_plans.id"], name=op.f("fk_packs_plan_id_packing_plans")),
        sa.PrimaryKeyConstraint("plan_id", "pack", name=op.f("pk_packs")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "packed_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["packing_plans.id"],
                                name=op.f("fk_packed_entries_plan_id_packing_plans")),
        sa.ForeignKeyConstraint(["entry_id"], ["base_entries.id"],
                                name=op.f("fk_packed_entries_entry_id_base_entries")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_packed_entries")),
    )
    for statement in (ENTRY_LENGTHS_VIEW, PACK_PLANS_VIEW, PACK_MEMBERS_VIEW):
        op.execute(statement)


def downgrade() -> None:
    for view in ("pack_members", "pack_plans", "entry_lengths"):
        op.execute(f"DROP VIEW {view}")
    for table in ("packed_entries", "packs", "packing_plans", "entry_renders", "render_specs"):
        op.drop_table(table)

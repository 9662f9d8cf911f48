"""Why an entry does not train, and what became of its reasoning, per entry and spec.

``entry_renders.cause`` names the cause of a status that does not train in words that group: a
stable code (``generation_prompt``, ``rewrites_turns``, ``no_prompt``, ``tool_shape``, ...) or,
for what a template raised, ``template: <its message>``; ``dataidx render``, ``info`` and the
report count entries per cause. NULL for entries that train and for specs stored before 0010.

``entry_renders.reasoning`` says what became of an entry's reasoning (v1's ``reasoning`` blocks
and ``<think>`` text): NULL when it has none, else ``kept``, ``dropped`` (in the source, absent
from the supervised tokens), ``inline`` (``<think>`` in the answer's text, trained as text, as v1
does), ``unclosed``, ``no_answer`` or ``mode_mismatch`` (``/no_think`` with reasoning, ``/think``
without). The ``entry_lengths`` view gains both columns.

``render_causes`` counts, per spec, the entries of each cause (``kind`` ``status``) and of each
reasoning status (``kind`` ``reasoning``), with the first as an example: ``dataidx info`` and the
report read it without scanning a spec's entries.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


_VIEW_HEAD = """
CREATE VIEW entry_lengths AS
SELECT s.name AS spec, d.name AS dataset, b.row AS row, b.cut AS cut, r.tokens AS tokens,
       r.supervised_tokens AS supervised_tokens, r.status AS status, r.full_tokens AS full_tokens,
       r.detail AS detail"""
_VIEW_FROM = """
FROM entry_renders AS r
JOIN render_specs AS s ON s.id = r.spec_id
JOIN base_entries AS b ON b.id = r.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
"""


def upgrade() -> None:
    op.add_column("entry_renders", sa.Column("cause", sa.String(), nullable=True))
    op.add_column("entry_renders", sa.Column("reasoning", sa.String(), nullable=True))
    op.execute("DROP VIEW entry_lengths")
    op.execute(_VIEW_HEAD + ", r.cause AS cause, r.reasoning AS reasoning" + _VIEW_FROM)
    op.create_table(
        "render_causes",
        sa.Column("spec_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("cause", sa.String(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("example_entry", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["spec_id"], ["render_specs.id"], name=op.f("fk_render_causes_spec_id_render_specs")),
        sa.ForeignKeyConstraint(["example_entry"], ["base_entries.id"],
                                name=op.f("fk_render_causes_example_entry_base_entries")),
        sa.PrimaryKeyConstraint("spec_id", "kind", "cause", name=op.f("pk_render_causes")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("render_causes")
    op.execute("DROP VIEW entry_lengths")
    op.execute(_VIEW_HEAD + _VIEW_FROM)
    # In place, as 0009's downgrade: both databases drop a column no view reads (SQLite since 3.35).
    op.execute("ALTER TABLE entry_renders DROP COLUMN reasoning")
    op.execute("ALTER TABLE entry_renders DROP COLUMN cause")

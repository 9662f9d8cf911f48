"""Packing plans by LLaMA-Factory v1's dynamic batching strategies, and for a topology.

- ``packing_plans.strategy``: ``best-fit`` (best-fit-decreasing packs, as before), or v1's
  ``dynamic`` (padded micro-batches) or ``dynamic-padding-free`` (packed ones), cut from a seeded
  stream of the positions by ``micro_batch_size`` times the spec's cutoff tokens
  (``packing_plans.micro_batch_size``; NULL for best-fit).

Plans for a topology: the world size and packs a rank takes a step that a plan was made
for, how its order balances them (``tokens``: seeded shuffle, as before; ``compute``: every
rank's share of a step about equal in estimated cost), and the cost model ``a * L + b * L**2``
per sequence of ``L`` tokens it was costed with. Plans made before have none (NULL, ``tokens``).

- view ``plan_balance``: per plan made for a topology, epoch, whole global step and rank, its
  packs, tokens and estimated cost (a padded micro-batch, ``dynamic``, costs its count times its
  longest sample: padding is computed too), and the step's imbalance (its costliest rank over
  the mean).

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_INT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
PLAN_BALANCE_VIEW = """
CREATE VIEW plan_balance AS
WITH pack_costs AS (
    SELECT k.plan_id, k.pack, k.tokens, sum(CAST(r.tokens AS DOUBLE PRECISION) * r.tokens) AS squares,
           count(*) AS members, max(r.tokens) AS longest
    FROM packs AS k
    JOIN packing_plans AS p ON p.id = k.plan_id
    JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1
         AND e.plan_id = k.plan_id
    JOIN entry_renders AS r ON r.spec_id = p.spec_id AND r.entry_id = e.entry_id
    WHERE p.world_size IS NOT NULL
    GROUP BY k.plan_id, k.pack, k.tokens
), costed AS (
    SELECT c.plan_id, c.pack, c.tokens,
           CASE WHEN p.strategy = 'dynamic' THEN c.members * (p.cost_a * c.longest
                + p.cost_b * CAST(c.longest AS DOUBLE PRECISION) * c.longest)
                ELSE p.cost_a * c.tokens + p.cost_b * c.squares END AS cost
    FROM pack_costs AS c JOIN packing_plans AS p ON p.id = c.plan_id
), ranks AS (
    SELECT p.name AS plan, pe.epoch AS epoch,
           (c.pack - pe.first_pack) / (p.world_size * p.micro_batches) AS step,
           ((c.pack - pe.first_pack) - (c.pack - pe.first_pack) / (p.world_size * p.micro_batches)
            * (p.world_size * p.micro_batches)) / p.micro_batches AS rank,
           count(*) AS packs, sum(c.tokens) AS tokens, sum(c.cost) AS cost
    FROM costed AS c
    JOIN packing_plans AS p ON p.id = c.plan_id
    JOIN plan_epochs AS pe ON pe.plan_id = c.plan_id AND c.pack BETWEEN pe.first_pack AND pe.first_pack + pe.packs - 1
    WHERE c.pack - pe.first_pack < pe.packs / (p.world_size * p.micro_batches) * (p.world_size * p.micro_batches)
    GROUP BY p.name, pe.epoch, p.world_size, p.micro_batches, c.pack - pe.first_pack
)
SELECT plan, epoch, step, rank, sum(packs) AS packs, sum(tokens) AS tokens, sum(cost) AS cost,
       max(sum(cost)) OVER (PARTITION BY plan, epoch, step) / avg(sum(cost)) OVER (PARTITION BY plan, epoch, step)
       AS imbalance
FROM ranks GROUP BY plan, epoch, step, rank
"""


def upgrade() -> None:
    op.add_column("packing_plans", sa.Column("strategy", sa.String(), nullable=False, server_default="best-fit"))
    op.add_column("packing_plans", sa.Column("micro_batch_size", _INT, nullable=True))
    op.add_column("packing_plans", sa.Column("world_size", _INT, nullable=True))
    op.add_column("packing_plans", sa.Column("micro_batches", _INT, nullable=True))
    op.add_column("packing_plans", sa.Column("balance", sa.String(), nullable=False, server_default="tokens"))
    op.add_column("packing_plans", sa.Column("cost_a", sa.Float(), nullable=True))
    op.add_column("packing_plans", sa.Column("cost_b", sa.Float(), nullable=True))
    op.execute(PLAN_BALANCE_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW plan_balance")
    for column in ("cost_b", "cost_a", "balance", "micro_batches", "world_size", "micro_batch_size", "strategy"):
        op.execute(f"ALTER TABLE packing_plans DROP COLUMN {column}")

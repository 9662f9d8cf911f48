"""A packing plan made for a topology (``dataidx pack --world-size W --micro-batches M``): its
packs' estimated cost per rank and step, and, with ``--balance compute``, an order that gives
every rank's share of every step about the same cost (:mod:`.balance`).

The cost model is ``a * L + b * L**2`` per sequence: given (``--cost A,B``), or read from a
model config (``--cost-config``: a config.json or the folder holding one), or else from the
config.json beside the spec's tokenizer, where a model folder has one. A plan without one is
refused in one line that says how to give it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UsageError
from .balance import CostModel, balanced_order, imbalance, rank_costs
from .planner import PlannedPacks

BALANCES = ("tokens", "compute")


@dataclass(frozen=True)
class Topology:
    """What a plan is made for: ``world_size`` ranks taking ``micro_batches`` packs a step, its
    order balancing ``tokens`` (a seeded shuffle) or ``compute``, costed with ``cost``."""

    world_size: int
    micro_batches: int
    balance: str
    cost: CostModel


@dataclass
class Balance:
    """Per epoch, the worst and mean step's imbalance (costliest rank over the mean) of the plan's
    order and of the token-balanced order of the same packs."""

    planned: list[tuple[float, float]] = field(default_factory=list)
    by_tokens: list[tuple[float, float]] = field(default_factory=list)

    def overall(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Over every epoch, ``(worst, mean)`` of the plan's order and of the token order."""
        return _over_epochs(self.planned), _over_epochs(self.by_tokens)


def _over_epochs(epochs: list[tuple[float, float]]) -> tuple[float, float]:
    if not epochs:
        return 1.0, 1.0
    return max(worst for worst, _ in epochs), sum(mean for _, mean in epochs) / len(epochs)


def topology_of(world_size: int | None, micro_batches: int | None, balance: str, *, cost: str | None,
                cost_config: str | os.PathLike[str] | None, tokenizer: str | None) -> Topology | None:
    """The topology the arguments ask for (None: a plan for none), checked."""
    if balance not in BALANCES:
        raise UsageError(f"--balance {balance!r}: one of {', '.join(BALANCES)}")
    if world_size is None:
        if balance == "compute" or micro_batches is not None or cost is not None or cost_config is not None:
            raise UsageError("--balance compute, --micro-batches and a cost model plan for a topology: give "
                             "--world-size (the ranks training)")
        return None
    if world_size < 1 or (micro_batches is not None and micro_batches < 1):
        raise UsageError(f"--world-size {world_size} and --micro-batches {micro_batches}: whole numbers 1 or more")
    return Topology(world_size, micro_batches or 1, balance, _cost_model(cost, cost_config, tokenizer))


def _cost_model(cost: str | None, cost_config: str | os.PathLike[str] | None, tokenizer: str | None) -> CostModel:
    if cost is not None and cost_config is not None:
        raise UsageError("give --cost A,B or --cost-config, not both")
    if cost is not None:
        parts = cost.split(",")
        try:
            a, b = (float(part) for part in parts)
        except ValueError:
            raise UsageError(f"--cost {cost!r}: two numbers A,B (a sequence of L tokens costs A*L + B*L^2)") from None
        if not (np.isfinite(a) and np.isfinite(b) and a >= 0 and b >= 0 and a + b > 0):
            raise UsageError(f"--cost {cost!r}: A and B are finite, not negative, and not both 0")
        return CostModel(a, b)
    path = Path(cost_config) if cost_config is not None else Path(tokenizer) if tokenizer else None
    config = path / "config.json" if path is not None and path.is_dir() else path
    if config is None or not config.is_file():
        where = f"{cost_config} has no config.json" if cost_config is not None else \
            f"the spec's tokenizer folder {tokenizer} has no config.json"
        raise UsageError(f"a plan for a topology costs its sequences A*L + B*L^2: {where}; give --cost A,B or "
                         "--cost-config MODEL_FOLDER")
    try:
        return CostModel.of_config(json.loads(config.read_text()))
    except (ValueError, OSError, TypeError, AttributeError) as exc:
        raise UsageError(f"{config}: {exc}") from None


def arranged(plan: PlannedPacks, lengths: np.ndarray, topology: Topology, seed: int, balance: Balance, *,
             padded: bool = False) -> PlannedPacks:
    """``plan`` in the order its topology asks (``lengths``: its items' tokens), with the order's
    imbalance and the token order's added to ``balance``. A ``padded`` micro-batch (v1's
    ``dynamic``) costs each of its rows as long as its longest: padding is computed too."""
    starts = np.cumsum(plan.sizes) - plan.sizes
    if not len(plan.sizes):
        costs = np.zeros(0)
    elif padded:
        longest = np.maximum.reduceat(lengths[plan.members], starts)
        costs = plan.sizes * topology.cost.of_sequences(longest)
    else:
        costs = np.add.reduceat(topology.cost.of_sequences(lengths[plan.members]), starts)
    shape = {"world_size": topology.world_size, "micro_batches": topology.micro_batches}
    by_tokens = imbalance(rank_costs(costs, np.arange(len(costs)), **shape))
    balance.by_tokens.append(_worst_and_mean(by_tokens))
    if topology.balance == "tokens":
        balance.planned.append(_worst_and_mean(by_tokens))
        return plan
    order = balanced_order(costs, seed=seed, **shape)
    balance.planned.append(_worst_and_mean(imbalance(rank_costs(costs, order, **shape))))
    return reordered(plan, order)


def reordered(plan: PlannedPacks, order: np.ndarray) -> PlannedPacks:
    """``plan``'s packs in ``order`` (pack ``i`` of the result is ``order[i]`` of the plan)."""
    starts = np.cumsum(plan.sizes) - plan.sizes
    sizes = plan.sizes[order]
    at = np.repeat(starts[order] - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))
    return PlannedPacks(members=plan.members[at], sizes=sizes, pack_tokens=plan.pack_tokens[order],
                        capacity=plan.capacity, seed=plan.seed, tokens=plan.tokens)


def _worst_and_mean(ratios: np.ndarray) -> tuple[float, float]:
    return (float(ratios.max()), float(ratios.mean())) if len(ratios) else (1.0, 1.0)

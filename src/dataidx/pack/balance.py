"""Packs ordered so that every rank's share of every global step costs about the same compute.

Tokens are not compute: attention grows as the square of a sequence's length, so a pack holding
one 32k sequence costs far more than one holding sixty-four of 512, and the ranks that hold
equal tokens wait for the one holding the long sequence. A sequence of ``L`` tokens is costed
``a * L + b * L**2`` (:class:`CostModel`: the matrix products' FLOPs per token, and causal
attention's per token pair), a pack the sum over its sequences.

The order does the balancing, so the packs and their fill are a plan's as before.
:class:`~dataidx.training.OrderSampler` reads a global step as ``world_size * micro_batches``
consecutive items, each rank its consecutive ``micro_batches`` of them. So:

1. packs are sorted by cost and cut into steps of ``world_size * micro_batches``: a step's packs
   cost about the same;
2. within a step, packs go to ranks costliest first, each to the cheapest rank that still has
   room (every rank gets ``micro_batches``: no rank waits on a collective another never reaches);
3. the steps are shuffled with the plan's seed, so training does not see costs in order; the
   packs a whole step cannot take (fewer than a step's worth) come last, where the sampler's
   ``tail="trim"`` leaves them out as it leaves any tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .planner import shuffled_positions


@dataclass(frozen=True)
class CostModel:
    """Estimated training FLOPs of a sequence of ``L`` tokens: ``a * L + b * L**2``."""

    a: float
    b: float

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> CostModel:
        """From a transformers model config (``hidden_size``, ``num_hidden_layers``,
        ``intermediate_size``, ``num_attention_heads``, optional ``num_key_value_heads``,
        ``vocab_size``): forward and backward are three times the forward's 2 FLOPs a
        multiply-add. ``a`` is 6 times the matrix products' weights (attention projections,
        a gated MLP, the output layer); ``b`` is causal attention's 6 * layers * hidden (its two
        products, half the token pairs)."""
        try:
            hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
            inner, heads = int(config["intermediate_size"]), int(config["num_attention_heads"])
            vocab = int(config.get("vocab_size", 0))
            kv_heads = int(config.get("num_key_value_heads") or heads)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a model config needs hidden_size, num_hidden_layers, intermediate_size and "
                             f"num_attention_heads as whole numbers ({exc})") from None
        kv = hidden // heads * kv_heads
        weights = layers * (hidden * (hidden + 2 * kv) + hidden * hidden + 3 * hidden * inner) + hidden * vocab
        return cls(a=6.0 * weights, b=6.0 * layers * hidden)

    def of_sequences(self, lengths: np.ndarray) -> np.ndarray:
        lengths = np.asarray(lengths, dtype=np.float64)
        return self.a * lengths + self.b * lengths * lengths


def pack_costs(model: CostModel, lengths: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each pack's cost: the sum over its members (``lengths`` in pack order, ``sizes`` per pack)."""
    per_member = model.of_sequences(lengths)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return np.add.reduceat(per_member, starts) if len(sizes) else np.zeros(0)


def balanced_order(costs: np.ndarray, *, world_size: int, micro_batches: int, seed: int) -> np.ndarray:
    """The order of packs (indexes into ``costs``) whose every global step gives each rank
    ``micro_batches`` packs of about equal total cost."""
    step = world_size * micro_batches
    by_cost = np.argsort(-np.asarray(costs, dtype=np.float64), kind="stable")
    whole = len(by_cost) // step * step
    steps = by_cost[:whole].reshape(-1, step)  # each row: a step's packs, costliest first
    ranks = _dealt(np.asarray(costs)[steps], world_size, micro_batches)
    ordered = np.take_along_axis(steps, ranks, axis=1)
    shuffled = ordered[shuffled_positions(len(ordered), seed)] if len(ordered) else ordered
    return np.concatenate([shuffled.reshape(-1), by_cost[whole:]])


def _dealt(costs: np.ndarray, world_size: int, micro_batches: int) -> np.ndarray:
    """Per step (a row of costs, costliest first), the order of its packs that puts rank ``r``'s
    in places ``r * micro_batches ..``: each pack to the cheapest rank with room, all steps at once."""
    count = len(costs)
    load = np.zeros((count, world_size))
    filled = np.zeros((count, world_size), dtype=np.int64)
    places = np.empty((count, world_size * micro_batches), dtype=np.int64)
    rows = np.arange(count)
    for pack in range(world_size * micro_batches):
        open_load = np.where(filled < micro_batches, load, np.inf)
        rank = np.argmin(open_load, axis=1)
        places[rows, rank * micro_batches + filled[rows, rank]] = pack
        load[rows, rank] += costs[:, pack]
        filled[rows, rank] += 1
    return places


def rank_costs(costs: np.ndarray, order: np.ndarray, *, world_size: int, micro_batches: int) -> np.ndarray:
    """Per whole global step of ``order``, each rank's cost: shape ``(steps, world_size)``."""
    step = world_size * micro_batches
    whole = len(order) // step * step
    return np.asarray(costs)[order[:whole]].reshape(-1, world_size, micro_batches).sum(axis=2)


def imbalance(per_rank: np.ndarray) -> np.ndarray:
    """Per step, the costliest rank's cost over the ranks' mean (1.0 is perfect balance)."""
    mean = per_rank.mean(axis=1)
    return np.divide(per_rank.max(axis=1), mean, out=np.ones(len(per_rank)), where=mean > 0)

"""Compute-balanced pack orders (issue 56): each global step gives every rank the same number of
packs, of about equal estimated cost, where today's seeded shuffle leaves the rank holding a long
sequence's pack far above the mean; the packs themselves (and their fill) are the plan's."""

from __future__ import annotations

import numpy as np
import pytest

from dataidx.pack.balance import CostModel, balanced_order, imbalance, pack_costs, rank_costs
from dataidx.pack.planner import plan_packs

LLAMA_7B = {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008, "num_attention_heads": 32,
            "vocab_size": 32000}


def long_tailed(count: int, cutoff: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(np.maximum(rng.lognormal(np.log(cutoff / 20), 1.2, count).astype(np.int64), 1), cutoff)


@pytest.mark.parametrize(("world_size", "micro_batches"), [(8, 1), (8, 4), (3, 2), (1, 5)])
def test_every_step_is_balanced_within_five_percent_with_equal_packs_per_rank(world_size: int,
                                                                              micro_batches: int) -> None:
    lengths = long_tailed(40_000, 32_768)  # the cutoff: attention is up to half a long pack's cost
    plan = plan_packs(lengths, 32_768, seed=0)
    costs = pack_costs(CostModel.of_config(LLAMA_7B), lengths[plan.members], plan.sizes)
    order = balanced_order(costs, world_size=world_size, micro_batches=micro_batches, seed=3)
    assert sorted(order.tolist()) == list(range(len(costs)))  # every pack, once
    balanced = imbalance(rank_costs(costs, order, world_size=world_size, micro_batches=micro_batches))
    shuffled = imbalance(rank_costs(costs, np.arange(len(costs)), world_size=world_size,
                                    micro_batches=micro_batches))
    assert balanced.max() <= 1.05 and len(balanced) == len(costs) // (world_size * micro_batches)
    if world_size > 1:  # what a token-balanced plan leaves: tokens equal, compute not
        assert shuffled.mean() > balanced.mean() + 0.02 and shuffled.max() > 1.1
    tokens = rank_costs(plan.pack_tokens.astype(np.float64), np.arange(len(costs)), world_size=world_size,
                        micro_batches=micro_batches)
    assert imbalance(tokens).mean() < 1.01 or world_size == 1  # and its tokens are balanced already


def test_the_order_is_the_seeds_and_the_tail_comes_last() -> None:
    costs = np.random.default_rng(1).random(103)
    first, again, other = (balanced_order(costs, world_size=4, micro_batches=2, seed=seed) for seed in (5, 5, 6))
    assert first.tolist() == again.tolist() and first.tolist() != other.tolist()
    assert sorted(first[96:].tolist()) == sorted(np.argsort(-costs, kind="stable")[96:].tolist())  # the cheapest 7


def test_a_long_sequence_costs_more_than_short_ones_of_its_tokens() -> None:
    model = CostModel.of_config(LLAMA_7B)
    one = pack_costs(model, np.array([1024]), np.array([1]))
    two = pack_costs(model, np.array([512, 512]), np.array([2]))
    assert model.a == pytest.approx(6 * 6_607_077_376, rel=1e-9) and model.b == 6 * 32 * 4096
    assert one[0] > two[0] and one[0] - two[0] == pytest.approx(model.b * (1024**2 - 2 * 512**2))


def test_a_config_without_its_sizes_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="hidden_size, num_hidden_layers"):
        CostModel.of_config({"hidden_size": 64})
    with pytest.raises(ValueError, match="whole numbers"):
        CostModel.of_config({**LLAMA_7B, "num_hidden_layers": "many"})

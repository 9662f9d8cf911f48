"""Packing plans: exactly best-fit-decreasing, every item once, nothing over capacity, seeded."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.pack import best_fit_decreasing, plan_packs

from .helpers import examples


def reference_bfd(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit-decreasing the obvious O(n^2) way, item by item, same tie rules."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    room: list[int] = []
    opened_at: list[int] = []  # among equally tight bins, the one that reached that room last wins
    clock = 0
    for item in order:
        fitting = [b for b in range(len(bins)) if room[b] >= lengths[item]]
        if fitting:
            target = min(fitting, key=lambda b: (room[b], -opened_at[b]))
        else:
            target = len(bins)
            bins.append([])
            room.append(capacity)
            opened_at.append(0)
        bins[target].append(item)
        room[target] -= lengths[item]
        clock += 1
        opened_at[target] = clock
    return bins


@settings(max_examples=examples(300))
@given(capacity=st.integers(1, 40), data=st.data())
def test_equals_item_by_item_best_fit_decreasing(capacity: int, data: st.DataObject) -> None:
    lengths = data.draw(st.lists(st.integers(1, capacity), max_size=40))
    packs = best_fit_decreasing(lengths, capacity)
    assert sorted(i for pack in packs for i in pack) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in pack) <= capacity for pack in packs)
    assert packs == reference_bfd(lengths, capacity)  # the same bins, in opening order, items in placement order


@pytest.mark.slow
def test_fill_on_realistic_lengths_and_same_seed_same_plan() -> None:
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(6.2, 0.9, 50_000).astype(int), 16, 4096)
    plan = plan_packs(lengths, 4096, seed=3)
    assert plan.fill >= 0.995
    assert sorted(i for pack in plan.packs for i in pack) == list(range(len(lengths)))
    assert max(int(lengths[pack].sum()) for pack in plan.packs) <= 4096
    assert plan_packs(lengths, 4096, seed=3).packs == plan.packs
    assert plan_packs(lengths, 4096, seed=4).packs != plan.packs
    assert sorted(map(tuple, plan_packs(lengths, 4096, seed=4).packs)) == sorted(map(tuple, plan.packs))


def test_bad_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="item length 9 does not fit a pack of capacity 8"):
        best_fit_decreasing([3, 9], 8)
    with pytest.raises(ValueError, match="item length 0"):
        best_fit_decreasing([0, 3], 8)
    assert best_fit_decreasing([], 8) == []


@settings(max_examples=examples(200))
@given(capacity=st.integers(1, 40), seed=st.integers(0, 2**32), data=st.data())
def test_a_plan_is_the_bins_shuffled_as_random_shuffle_shuffles_a_list(capacity: int, seed: int,
                                                                       data: st.DataObject) -> None:
    """Plans hold arrays, not lists of lists, and stay the plans 0.2.0 stored: the bins in
    best-fit-decreasing order, shuffled by random.Random(seed).shuffle."""
    lengths = data.draw(st.lists(st.integers(1, capacity), max_size=60))
    bins = best_fit_decreasing(lengths, capacity)
    random.Random(seed).shuffle(bins)
    plan = plan_packs(lengths, capacity, seed)
    assert plan.packs == bins
    assert plan.sizes.tolist() == [len(pack) for pack in bins]
    assert plan.tokens == sum(lengths)


@settings(max_examples=examples(100))
@given(capacity=st.integers(1, 40), seed=st.integers(0, 2**32), chunk=st.integers(1, 8), data=st.data())
def test_a_plan_grouped_a_few_items_at_a_time_is_the_same_plan(capacity: int, seed: int, chunk: int,
                                                              data: st.DataObject) -> None:
    """The pack order's sort keys are written a million items at a time, and the bins items go to
    a million runs at a time: chunks of a few items or runs give the plan the item-by-item
    reference shuffled as random.shuffle shuffles it."""
    lengths = data.draw(st.lists(st.integers(1, capacity), max_size=60))
    bins = reference_bfd(lengths, capacity)
    random.Random(seed).shuffle(bins)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dataidx.pack.planner._KEYS_PER_CHUNK", chunk)
        patch.setattr("dataidx.pack.planner._RUNS_PER_WRITE", chunk + 7)
        assert plan_packs(lengths, capacity, seed).packs == bins


@settings(max_examples=examples(100))
@given(keys=st.lists(st.one_of(st.integers(0, 3), st.integers(0, 2**16 - 1)), max_size=80), chunk=st.integers(1, 9))
def test_the_longest_first_order_counted_a_chunk_at_a_time_is_the_stable_argsort(keys: list[int], chunk: int) -> None:
    from dataidx.pack.planner import _stable_order

    rooms = np.asarray(keys, dtype=np.uint16)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dataidx.pack.planner._KEYS_PER_CHUNK", chunk)
        order = _stable_order(rooms, np.int32)
    assert order.dtype == np.int32 and order.tolist() == np.argsort(rooms, kind="stable").tolist()


@settings(max_examples=examples(100))
@given(capacity=st.integers(1, 40), seed=st.integers(0, 2**32), data=st.data())
def test_each_packs_tokens_and_the_plan_without_a_keys_buffer(capacity: int, seed: int, data: st.DataObject) -> None:
    """A pack's tokens come from its bin's last room, not from summing its members; past 2**31
    items the pack order is sorted outside the keys' buffer (here forced): the same plan."""
    from dataidx.pack.planner import AssignedBins, _assign, assign_bins, ordered_packs

    lengths = data.draw(st.lists(st.integers(1, capacity), max_size=60))
    plan = ordered_packs(assign_bins(lengths, capacity), seed)
    assert plan.pack_tokens.tolist() == [sum(lengths[i] for i in pack) for pack in plan.packs]
    assert plan.sizes.tolist() == [len(pack) for pack in plan.packs] and plan.tokens == sum(lengths)
    order, bin_of, tokens = _assign(np.asarray(lengths, dtype=np.int64), capacity)
    unbuffered = ordered_packs(AssignedBins(order=order, bin_of=bin_of, tokens=tokens, keys=None, capacity=capacity,
                                            total=sum(lengths)), seed)
    assert unbuffered.packs == plan.packs and unbuffered.pack_tokens.tolist() == plan.pack_tokens.tolist()

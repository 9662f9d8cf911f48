"""``dataidx pack``: best-fit-decreasing packing plans of a mixture under a render spec, stored.

The plan packs every position of the mixture whose entry trains under the spec (status ok or
truncated; the others are counted as ``left_out`` and their status rows say why), shuffles the
pack order with the recorded seed, and stores packs and members so training and SQL read the
same plan. An entry longer than the capacity is refused, not dropped: render with a cutoff that
fits. With ``--merge-cuts`` a conversation's cuts may be one item of the plan (:mod:`.merging`):
its members stay one row each, in cut order, each ``joined`` to the next.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from .._version import __version__
from ..errors import StoreError, UsageError
from ..index import epoch_seed
from ..render import open_tokens, read_spec
from ..spec import DEFAULT_SEED
from ..store import (
    Datasets,
    Mixtures,
    Plans,
    ReadIdentity,
    Specs,
    open_store,
    rewriting,
)
from .epoch_items import POSITIONS_PER_CHUNK, planned_packs, spec_lengths, training_lengths, training_positions
from .merging import MODES, TokenWords, merge_epoch
from .planner import PlannedPacks, count_packs, plan_packs
from .strategies import STRATEGIES
from .topology import Balance, Topology, arranged, topology_of


@dataclass(kw_only=True)
class PackSummary:
    """A stored plan: how many packs and entries, how full, and how long it took."""

    name: str
    spec: str
    mixture: str
    capacity: int
    seed: int
    packs: int
    entries: int
    tokens: int
    fill: float
    left_out: int
    seconds: float
    plan_seconds: float
    #: packs of each epoch, in order (``packs`` is their sum)
    epoch_packs: list[int] = field(default_factory=list)
    #: ``no``, ``chains`` or ``trees`` (``--merge-cuts``)
    merge_cuts: str = "no"
    #: with merging: tokens the same positions forward as cuts, and packs each epoch would take so
    unmerged_tokens: int = 0
    unmerged_packs: list[int] = field(default_factory=list)
    #: with merging: per outcome (merged, tree or why not), ``[rows, entries, cut tokens, tokens]`` over epochs
    merges: dict[str, list[int]] = field(default_factory=dict)
    #: the topology the plan was made for, and its steps' imbalance against the token order's
    topology: Topology | None = None
    balance: Balance = field(default_factory=Balance)

    def steps(self, global_batch_size: int, *, unmerged: bool = False) -> list[tuple[int, int]]:
        """Per epoch: ``(optimizer steps, packs left over)`` at ``global_batch_size`` packs a step
        (the DataLoader drops the last packs that do not fill a step); ``unmerged``: of the plan
        without ``--merge-cuts``."""
        return [divmod(packs, global_batch_size) for packs in (self.unmerged_packs if unmerged else self.epoch_packs)]


def pack_store(
    store: str | os.PathLike[str], spec: str, *, capacity: int | None = None, mixture: str = "default",
    seed: int = DEFAULT_SEED, name: str = "default", merge_cuts: str = "no", world_size: int | None = None,
    micro_batches: int | None = None, balance: str = "tokens", cost: str | None = None,
    cost_config: str | os.PathLike[str] | None = None, strategy: str = "best-fit", micro_batch_size: int | None = None,
) -> PackSummary:
    """Plan packs of ``capacity`` tokens over ``mixture`` with ``spec``'s lengths; store as ``name``.

    A mixture of several epochs gets a plan per epoch, each shuffled with its own seed (the
    plan's ``seed`` for epoch 0); the summary adds them up.

    ``merge_cuts="chains"`` packs a conversation whose cuts' stored token ids are each a prefix
    of the next as one sequence (its last cut's tokens, every cut's supervised tokens labelled);
    ``"trees"`` also packs the others as prefix trees (:mod:`.merging`). Both need the spec's
    stored tokens: the check reads the real ids.

    ``strategy`` ``dynamic`` or ``dynamic-padding-free`` cuts LLaMA-Factory v1's micro-batches
    (:mod:`.strategies`) from a seeded stream of the positions, ``micro_batch_size`` times the
    spec's cutoff tokens each, instead of best-fit packs of ``capacity``.

    ``world_size`` ranks taking ``micro_batches`` packs a step: the plan records them and each
    step's cost per rank (view ``plan_balance``); ``balance="compute"`` orders the packs so that
    every rank's share of a step costs about the same (:mod:`.topology`, ``cost`` ``"A,B"`` or
    ``cost_config`` a model config, else the spec's tokenizer folder's).

    Example::

        pack_store("demo.db", "default", capacity=4096, seed=0)
        # SELECT * FROM pack_plans; SELECT * FROM pack_members WHERE plan = 'default' AND pack = 0
    """
    started = time.perf_counter()
    if strategy != "best-fit" and (strategy not in STRATEGIES or merge_cuts != "no" or capacity is not None):
        raise UsageError(f"--strategy {strategy!r}: best-fit, or v1's {' or '.join(STRATEGIES)}, whose micro-batches "
                         "hold --micro-batch-size times the spec's cutoff tokens (no --capacity, no --merge-cuts)")
    if (strategy == "best-fit") != (micro_batch_size is None) or (micro_batch_size is not None and
                                                                   micro_batch_size < 1):
        raise UsageError("--micro-batch-size (1 or more) sizes v1's dynamic strategies' micro-batches: give it with "
                         "--strategy dynamic or dynamic-padding-free, and --capacity with best-fit")
    if capacity is not None and not 0 < capacity < 2**31:
        raise UsageError(f"capacity must be from 1 to {2**31 - 1} tokens, got {capacity}")
    if not -(2**63) <= seed < 2**63:
        raise UsageError(f"seed {seed} does not fit in 64 bits")
    if merge_cuts not in ("no", *MODES):
        raise UsageError(f"merge_cuts must be one of no, {', '.join(MODES)}; got {merge_cuts!r}")
    with open_store(store) as handle:
        read = ReadIdentity.of(handle, mixture=mixture, spec=spec)
        stored_spec = read_spec(handle, spec)
        if capacity is None:
            if micro_batch_size is None:
                raise UsageError("give --capacity (tokens a pack holds)")
            capacity = stored_spec.cutoff * micro_batch_size
        stored_mixture = Mixtures(handle).get(mixture)
        pairs = Mixtures(handle).pair_datasets(stored_mixture.id)
        if pairs:
            raise StoreError(f"{store}: mixture '{mixture}' holds preference data ({', '.join(pairs)}): its chosen and "
                             "rejected sides train side by side, so it is batched padded, not packed")
        if merge_cuts != "no" and stored_spec.processor is not None:
            raise UsageError(f"spec '{spec}' renders media with a processor: merged cuts would serve a conversation's "
                             "images once per cut they share; pack without --merge-cuts")
        topology = topology_of(world_size, micro_batches, balance, cost=cost, cost_config=cost_config,
                               tokenizer=stored_spec.tokenizer_path)
        if topology is not None and merge_cuts != "no":
            raise UsageError("a plan for a topology costs each member as a sequence of its own, and --merge-cuts "
                             "trains several as one: give one or the other")
        tokens = open_tokens(handle, store, stored_spec, required=merge_cuts != "no")
        lengths: Specs.Lengths | None = spec_lengths(handle, stored_spec.id, tokens)
        merging = None
        if merge_cuts != "no":
            assert tokens is not None  # required: refused above without them
            _, starts = Datasets(handle).row_starts()
            _, words, index = tokens.mapped()
            merging = (starts, TokenWords(words=words, starts=index, first_entry=tokens.first_entry,
                                          mask=(1 << (words.dtype.itemsize * 8 - 1)) - 1))
        summary = PackSummary(name=name, spec=spec, mixture=mixture, capacity=capacity, seed=seed, packs=0, entries=0,
                              tokens=0, fill=1.0, left_out=0, seconds=0.0, plan_seconds=0.0, merge_cuts=merge_cuts,
                              topology=topology)
        columns = {"name": name, "spec_id": stored_spec.id, "mixture_id": stored_mixture.id, "capacity": capacity,
                   "seed": seed, "dataidx_version": __version__, "merge_cuts": merge_cuts,
                   "world_size": topology and topology.world_size, "micro_batches": topology and topology.micro_batches,
                   "balance": topology.balance if topology else "tokens", "cost_a": topology and topology.cost.a,
                   "cost_b": topology and topology.cost.b, "strategy": strategy, "micro_batch_size": micro_batch_size}

        def epochs() -> Iterator[Plans.EpochPacks]:
            nonlocal lengths
            for epoch in range(stored_mixture.epochs):
                entries = Mixtures(handle).entries_of(stored_mixture.at(epoch))
                plan_started = time.perf_counter()
                assert lengths is not None  # let go of only after the last epoch's read
                trains, item_lengths = training_lengths(entries, lengths, capacity=capacity, store=store,
                                                         mixture=mixture, spec=spec)
                if merging is not None:
                    packs = _merged_epoch_packs(entries, lengths, item_lengths, capacity=capacity,
                                                seed=epoch_seed(seed, epoch), merging=merging, summary=summary)
                    del entries, trains
                else:
                    if epoch == stored_mixture.epochs - 1:
                        lengths = None  # read for the last time: not held while planning (5 bytes an entry)
                    # Each step lets go of what the next does not read. At 20M entries: the
                    # entries (76 MB, read again after planning in 0.8 s) and the lengths (76 MB)
                    # before the pack order is sorted, the placement order (76 MB) before the
                    # members become positions and entries.
                    del entries
                    costed = item_lengths if topology is not None else None  # a topology's costs read them
                    plan = planned_packs(strategy, item_lengths, capacity=capacity, cutoff=stored_spec.cutoff,
                                    seed=epoch_seed(seed, epoch))
                    del item_lengths
                    if topology is not None and costed is not None:  # costed, then ordered for the ranks
                        plan = arranged(plan, costed, topology, epoch_seed(seed, epoch), summary.balance,
                                        padded=strategy == "dynamic")
                    del costed
                    entries = Mixtures(handle).entries_of(stored_mixture.at(epoch))
                    positions = training_positions(trains)
                    del trains
                    packs = _epoch_packs(entries, positions, plan)
                    del plan, entries, positions
                summary.epoch_packs.append(len(packs.sizes))
                summary.plan_seconds += time.perf_counter() - plan_started
                yield packs
                del packs

        # The first epoch is planned while the store is copied for writing (at 20M entries a
        # 2 GB copy takes as long as the plan); the others, each after the last is written.
        planning = epochs()
        planned: list[Plans.EpochPacks] = []

        def in_order() -> Iterator[Plans.EpochPacks]:
            while planned:
                yield planned.pop()
            yield from planning

        with rewriting(store, unchanged=read, task="planning", command="pack",
                       meanwhile=lambda: planned.extend(islice(planning, 1))) as writer:
            totals = Plans(writer).save(columns, in_order(), started)
    summary.packs, summary.entries, summary.tokens = totals["packs"], totals["entries"], totals["tokens"]
    summary.fill, summary.left_out, summary.seconds = totals["fill"], totals["left_out"], totals["seconds"]
    return summary


def _epoch_packs(entries: np.ndarray, positions: np.ndarray, plan: PlannedPacks) -> Plans.EpochPacks:
    """One epoch's packs from its ``plan`` over the ``positions`` that train (the base entries of
    all its positions: ``entries``). The plan's members, item indices, become ``position << 32 |
    entry_id`` where they are, a chunk at a time."""
    members = plan.members
    for start in range(0, len(members), POSITIONS_PER_CHUNK):
        at = positions[members[start : start + POSITIONS_PER_CHUNK]]
        value = at.astype(np.int64)
        value <<= 32
        value |= entries[at]
        members[start : start + len(at)] = value
    return Plans.EpochPacks(seed=plan.seed, members=members, sizes=plan.sizes, tokens=plan.pack_tokens,
                            positions=len(positions), left_out=int(len(entries) - len(positions)))


def _merged_epoch_packs(entries: np.ndarray, lengths: Specs.Lengths, unmerged: np.ndarray, *, capacity: int, seed: int,
                        merging: tuple[np.ndarray, TokenWords], summary: PackSummary) -> Plans.EpochPacks:
    """An epoch's plan whose items are merged conversations and the remaining training positions;
    ``unmerged`` holds the training positions' lengths (what the plan without merging packs)."""
    starts, words = merging
    items = merge_epoch(entries, lengths.tokens, lengths.trains, starts, lengths.first, words, mode=summary.merge_cuts,
                        capacity=capacity)
    summary.unmerged_tokens += int(unmerged.sum(dtype=np.int64))
    summary.unmerged_packs.append(count_packs(unmerged, capacity))
    for outcome in items.outcomes:
        totals = summary.merges.setdefault(outcome.outcome, [0, 0, 0, 0])
        for at, value in enumerate((outcome.rows, outcome.entries, outcome.cut_tokens, outcome.tokens)):
            totals[at] += value
    plan = plan_packs(items.lengths, capacity, seed)
    # Expand each planned item into its members: a merged conversation's cuts, in order.
    item_starts = np.cumsum(items.sizes) - items.sizes
    member_counts = items.sizes[plan.members]
    member_at = np.repeat(item_starts[plan.members] - (np.cumsum(member_counts) - member_counts), member_counts)
    member_at += np.arange(len(member_at))
    positions = items.members[member_at]
    joined = np.ones(len(positions), dtype=bool)
    joined[np.cumsum(member_counts) - 1] = False  # an item's last member ends its sequence
    pack_starts = np.cumsum(plan.sizes) - plan.sizes
    sizes = np.add.reduceat(member_counts, pack_starts) if len(plan.sizes) else plan.sizes
    members_at = positions.astype(np.int64) << 32 | entries[positions].astype(np.int64)
    return Plans.EpochPacks(seed=seed, members=members_at, sizes=sizes, tokens=plan.pack_tokens,
                            positions=len(positions), left_out=int(len(entries) - len(positions)), joined=joined,
                            merges=tuple((o.outcome, o.rows, o.entries, o.cut_tokens, o.tokens)
                                         for o in items.outcomes))

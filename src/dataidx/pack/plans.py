"""``dataidx pack``: best-fit-decreasing packing plans of a mixture under a render spec, stored.

The plan packs every position of the mixture whose entry trains under the spec (status ok or
truncated; the others are counted as ``left_out`` and their status rows say why), shuffles the
pack order with the recorded seed, and stores packs and members so training and SQL read the
same plan. An entry longer than the capacity is refused, not dropped: render with a cutoff that
fits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from .._version import __version__
from ..errors import StoreError, UsageError
from ..index import epoch_seed
from ..render import read_spec
from ..spec import DEFAULT_SEED
from ..store import (
    EpochPacks,
    SpecLengths,
    identity_of,
    open_store,
    position_entries,
    read_mixture,
    rewriting,
    save_packing_plan,
    spec_lengths,
)
from .planner import plan_packs


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

    def steps(self, global_batch_size: int) -> list[tuple[int, int]]:
        """Per epoch: ``(optimizer steps, packs left over)`` at ``global_batch_size`` packs a step
        (the DataLoader drops the last packs that do not fill a step)."""
        return [divmod(packs, global_batch_size) for packs in self.epoch_packs]


def pack_store(
    store: str | os.PathLike[str], spec: str, *, capacity: int, mixture: str = "default", seed: int = DEFAULT_SEED,
    name: str = "default",
) -> PackSummary:
    """Plan packs of ``capacity`` tokens over ``mixture`` with ``spec``'s lengths; store as ``name``.

    A mixture of several epochs gets a plan per epoch, each shuffled with its own seed (the
    plan's ``seed`` for epoch 0); the summary adds them up.

    Example::

        pack_store("demo.db", "default", capacity=4096, seed=0)
        # SELECT * FROM pack_plans; SELECT * FROM pack_members WHERE plan = 'default' AND pack = 0
    """
    started = time.perf_counter()
    if not 0 < capacity < 2**31:
        raise UsageError(f"capacity must be from 1 to {2**31 - 1} tokens, got {capacity}")
    if not -(2**63) <= seed < 2**63:
        raise UsageError(f"seed {seed} does not fit in 64 bits")
    with open_store(store) as handle:
        read = identity_of(handle, mixture=mixture, spec=spec)
        stored_spec = read_spec(handle, spec)
        stored_mixture = read_mixture(handle, mixture)
        pairs = [name for (name,) in handle.all(
            "SELECT d.name FROM mixture_datasets AS md JOIN datasets AS d ON d.id = md.dataset_id "
            "WHERE md.mixture_id = {mark} AND md.entries > 0 AND d.converter = 'pair' ORDER BY d.position",
            stored_mixture.id)]
        if pairs:
            raise StoreError(f"{store}: mixture '{mixture}' holds preference data ({', '.join(pairs)}): its chosen and "
                             "rejected sides train side by side, so it is batched padded, not packed")
        lengths = spec_lengths(handle, stored_spec.id)
        summary = PackSummary(name=name, spec=spec, mixture=mixture, capacity=capacity, seed=seed, packs=0, entries=0,
                              tokens=0, fill=1.0, left_out=0, seconds=0.0, plan_seconds=0.0)
        columns = {"name": name, "spec_id": stored_spec.id, "mixture_id": stored_mixture.id, "capacity": capacity,
                   "seed": seed, "dataidx_version": __version__}

        def epochs() -> Iterator[EpochPacks]:
            for epoch in range(stored_mixture.epochs):
                entries = position_entries(handle, stored_mixture.at(epoch))
                plan_started = time.perf_counter()
                packs = _epoch_packs(entries, lengths, capacity=capacity, seed=epoch_seed(seed, epoch), store=store,
                                     mixture=mixture, spec=spec)
                summary.epoch_packs.append(len(packs.sizes))
                summary.plan_seconds += time.perf_counter() - plan_started
                del entries
                yield packs
                del packs

        with rewriting(store, unchanged=read, task="planning", command="pack") as writer:
            totals = save_packing_plan(writer, columns, epochs(), started)
    summary.packs, summary.entries, summary.tokens = totals["packs"], totals["entries"], totals["tokens"]
    summary.fill, summary.left_out, summary.seconds = totals["fill"], totals["left_out"], totals["seconds"]
    return summary


def _epoch_packs(entries: np.ndarray, lengths: SpecLengths, *, capacity: int, seed: int, store: str | os.PathLike[str],
                 mixture: str, spec: str) -> EpochPacks:
    """One epoch's plan over the base entries ``entries`` of its positions (``store``, ``mixture``
    and ``spec`` name them in an error)."""
    # Arrays as small as they can be, each dropped once used: at 20M entries a copy is 80-160 MB.
    tokens, trains = lengths.of(entries)
    positions = np.flatnonzero(trains).astype(np.int32 if len(trains) < 2**31 else np.int64)
    item_lengths = tokens[positions]
    del tokens, trains
    too_long = item_lengths > capacity
    if too_long.any():
        raise StoreError(
            f"{store}: {int(too_long.sum())} entries of mixture '{mixture}' under spec '{spec}' are longer than "
            f"capacity {capacity} (longest {int(item_lengths.max())} tokens); render with --cutoff {capacity} or less"
        )
    del too_long
    plan = plan_packs(item_lengths, capacity, seed)
    sizes, members = plan.sizes, plan.members
    pack_tokens = np.add.reduceat(item_lengths[members], np.cumsum(sizes) - sizes) if len(members) else sizes
    del plan, item_lengths
    members_at = positions[members].astype(np.int64)  # position << 32 | entry_id, built in place
    del members
    entry_ids = entries[members_at]
    members_at <<= 32
    members_at |= entry_ids
    del entry_ids
    return EpochPacks(seed=seed, members=members_at, sizes=sizes, tokens=pack_tokens, positions=len(positions),
                      left_out=int(len(entries) - len(positions)))

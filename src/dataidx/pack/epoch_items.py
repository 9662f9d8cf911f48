"""What an epoch of a packing plan packs: its positions whose entries train under the spec, their
lengths (read from the token file's index where the spec stored tokens), and the packs planned
over them: best-fit-decreasing, or LLaMA-Factory v1's micro-batches of a seeded stream."""

from __future__ import annotations

import os

import numpy as np

from ..errors import StoreError
from ..render import TokenFile
from ..store import Datasets, Specs, StoreHandle
from .planner import PlannedPacks, assign_bins, ordered_packs
from .strategies import stream_packs


def planned_packs(strategy: str, lengths: np.ndarray, *, capacity: int, cutoff: int, seed: int) -> PlannedPacks:
    """An epoch's packs: best-fit-decreasing, shuffled, or v1's micro-batches of a shuffled stream."""
    if strategy != "best-fit":
        return stream_packs(strategy, lengths, cutoff=cutoff, micro_batch_size=capacity // cutoff, seed=seed)
    return ordered_packs(assign_bins(lengths, capacity), seed)


def spec_lengths(handle: StoreHandle, spec_id: int, tokens: TokenFile | None) -> Specs.Lengths:
    """The spec's lengths: from its token file's index when its tokens are stored and it indexes
    every base entry (0.05 s at 2M entries), else from the store (about 0.5 s a million)."""
    if tokens is not None:
        found = Datasets(handle).entry_range()
        if found is not None and found[0] == tokens.first_entry and found[1] - found[0] + 1 == tokens.entries:
            return tokens.lengths()
    return Specs(handle).lengths(spec_id)


#: Positions whose lengths are looked up at a time (what a chunk's temporaries hold: 8-16 MB).
POSITIONS_PER_CHUNK = 1 << 20


def training_lengths(entries: np.ndarray, lengths: Specs.Lengths, *, capacity: int, store: str | os.PathLike[str],
                      mixture: str, spec: str) -> tuple[np.ndarray, np.ndarray]:
    """``(trains, lengths)``: whether each of an epoch's positions (their base entries
    ``entries``) trains under the spec, and the lengths of those that do, in position order; an
    entry longer than ``capacity`` is refused (``store``, ``mixture`` and ``spec`` name it)."""
    # A chunk of positions at a time: at 20M entries each whole-epoch temporary is 80-160 MB.
    trains = np.empty(len(entries), dtype=bool)
    item_lengths = np.empty(len(entries), dtype=lengths.tokens.dtype)
    found = 0
    for start in range(0, len(entries), POSITIONS_PER_CHUNK):
        at = entries[start : start + POSITIONS_PER_CHUNK] - lengths.first
        chunk = trains[start : start + len(at)]
        chunk[:] = lengths.trains[at]
        kept = at[chunk]
        item_lengths[found : found + len(kept)] = lengths.tokens[kept]
        found += len(kept)
    item_lengths = item_lengths[:found]  # the rest was never written: it takes no memory
    too_long = item_lengths > capacity
    if too_long.any():
        raise StoreError(
            f"{store}: {int(too_long.sum())} entries of mixture '{mixture}' under spec '{spec}' are longer than "
            f"capacity {capacity} (longest {int(item_lengths.max())} tokens); render with --cutoff {capacity} or less"
        )
    return trains, item_lengths


def training_positions(trains: np.ndarray) -> np.ndarray:
    """The positions whose entries train, as 4-byte integers below 2**31 (a chunk at a time:
    ``np.flatnonzero`` makes 8-byte ones, 153 MB at 20M)."""
    positions = np.empty(len(trains), dtype=np.int32 if len(trains) < 2**31 else np.int64)
    found = 0
    for start in range(0, len(trains), POSITIONS_PER_CHUNK):
        kept = np.flatnonzero(trains[start : start + POSITIONS_PER_CHUNK])
        positions[found : found + len(kept)] = kept + start
        found += len(kept)
    return positions[:found]

"""Best-fit-decreasing's bin numbers, written into ``bin_of`` (each placed item's bin) in bulk:
the placements into open bins as runs, and the rest of a group of equal lengths into new bins,
as many a bin as fit (:mod:`.planner` decides where each item goes; this writes it down)."""

from __future__ import annotations

from array import array

import numpy as np


def write_runs(bin_of: np.ndarray, run_starts: array, run_bins: array, end: int) -> None:
    """Write the runs held into ``bin_of`` (the last one ends before item ``end``) and empty them."""
    if len(run_starts) < 8:  # a few, as when each bin takes many items: NumPy's calls cost more
        for at, number in enumerate(run_bins):
            bin_of[run_starts[at] : run_starts[at + 1] if at + 1 < len(run_starts) else end] = number
    else:
        starts = np.frombuffer(run_starts, dtype=np.int64)
        counts = np.empty(len(starts), dtype=np.int64)  # np.diff(append=) costs 25 us: called once a group
        np.subtract(starts[1:], starts[:-1], out=counts[:-1])
        counts[-1] = end - run_starts[-1]
        bin_of[run_starts[0] : end] = np.repeat(np.frombuffer(run_bins, dtype=np.int64), counts)
        del starts  # a buffer exported by the array: it cannot shrink while one is held
    del run_starts[:], run_bins[:]


def open_bins(bin_of: np.ndarray, placed: int, end: int, length: int, capacity: int, bins: int, base: int,
              by_room: dict[int, array], occupied: int) -> tuple[int, int]:
    """Items ``placed .. end`` (of one length) into new bins from number ``bins`` on, ``capacity //
    length`` a bin; each bin that keeps room is pushed to ``by_room`` in number order. Returns the
    bins opened so far and the new bitmask of rooms."""
    per_bin = capacity // length
    full, rest = divmod(end - placed, per_bin)
    bin_of[placed:end] = bins + np.arange(end - placed) // per_bin
    for count, first, room in ((full, bins, capacity - per_bin * length), (1 if rest else 0, bins + full,
                                                                           capacity - rest * length)):
        if count and room:
            by_room.setdefault(room, array("q")).extend(range(first, first + count))
            occupied |= 1 << (room - base)  # once a group: setdefault's new array costs nothing here
    return bins + full + (1 if rest else 0), occupied

"""LLaMA-Factory v1's dynamic batching strategies, decided once over a whole ordered stream.

v1 (``plugins/trainer_plugins/batching.py`` at ff6d4d12) fills a buffer from the data loader a
sample at a time and cuts micro-batches greedily from its front, with one budget of
``cutoff_len * micro_batch_size`` tokens:

- ``dynamic_batching`` (padded): a micro-batch takes samples while its longest sample times its
  count stays within the budget, and is done once the next sample would pass it, or it meets the
  budget exactly;
- ``dynamic_padding_free`` (one packed sequence): a micro-batch takes samples while their tokens
  stay within the budget, and is done only once the next sample would pass it.

Each sample counts ``min(length, cutoff_len)``. A step is ``num_micro_batch`` done micro-batches;
at the end of the data an unfinished micro-batch, and a step with fewer than
``num_micro_batch`` of them, are dropped, as v1's ``generate_batch`` drops them. Because each
micro-batch starts where the last ended, cutting the whole stream at once gives the micro-batches
v1 cuts from its buffer (``tests/test_batching_strategies.py`` runs v1's batchers to prove it).
Here the cuts are found in NumPy, a micro-batch at a time: a search in the running token sum
(padding-free), or in a running maximum over a window that doubles until it holds the cut.
"""

from __future__ import annotations

import numpy as np

from .planner import PlannedPacks, shuffled_positions

STRATEGIES = ("dynamic", "dynamic-padding-free")
#: Samples a padded micro-batch's window starts with (it doubles until it holds the cut).
_WINDOW = 64


def micro_batches(strategy: str, lengths: np.ndarray, *, cutoff: int, micro_batch_size: int,
                  num_micro_batch: int) -> np.ndarray:
    """The sample count of each micro-batch of ``lengths`` (tokens, in training order), whole steps
    of ``num_micro_batch`` only."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    sizes = _done(strategy, np.minimum(np.asarray(lengths, dtype=np.int64), cutoff), cutoff * micro_batch_size)
    return sizes[: len(sizes) // num_micro_batch * num_micro_batch]


def stream_packs(strategy: str, lengths: np.ndarray, *, cutoff: int, micro_batch_size: int,
                 seed: int) -> PlannedPacks:
    """A plan of ``strategy``'s micro-batches: the items (``lengths``, each at most ``cutoff``)
    in the order ``random.shuffle`` with ``seed`` gives them, cut as v1 cuts its stream. The
    samples after the last micro-batch v1 would finish are a micro-batch too (v1 drops them; a
    sampler's ``tail="trim"`` drops them as any tail, ``"pad"`` trains them)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    order = np.argsort(shuffled_positions(len(lengths), seed))  # the item at each place of the stream
    counted = np.asarray(lengths, dtype=np.int64)[order]
    budget = cutoff * micro_batch_size
    sizes = _done(strategy, counted, budget)
    rest = len(counted) - int(sizes.sum())
    sizes = np.append(sizes, rest) if rest else sizes
    starts = np.cumsum(sizes) - sizes
    tokens = np.add.reduceat(counted, starts) if len(sizes) else np.zeros(0, dtype=np.int64)
    return PlannedPacks(members=order.astype(np.int64), sizes=sizes, pack_tokens=tokens, capacity=budget, seed=seed,
                        tokens=int(counted.sum()))


def _done(strategy: str, counted: np.ndarray, budget: int) -> np.ndarray:
    """The micro-batches v1 finishes, cut from the whole stream."""
    return (_padding_free if strategy == "dynamic-padding-free" else _padded)(counted, budget)


def _padding_free(counted: np.ndarray, budget: int) -> np.ndarray:
    """Micro-batches of samples whose tokens stay within ``budget``; each done when the next
    sample would pass it (the last, without a next, is not done)."""
    total = np.zeros(len(counted) + 1, dtype=np.int64)
    np.cumsum(counted, out=total[1:])
    sizes = []
    start = 0
    while start < len(counted):
        # the first sample past the budget: everything before it fits
        stop = int(np.searchsorted(total, total[start] + budget, side="right")) - 1
        if stop >= len(counted):
            break  # the rest fits: no next sample to finish the micro-batch
        sizes.append(stop - start)
        start = stop
    return np.array(sizes, dtype=np.int64)


def _padded(counted: np.ndarray, budget: int) -> np.ndarray:
    """Micro-batches whose longest sample times their count stays within ``budget``; each done
    when the next sample would pass it, or when it meets the budget exactly."""
    sizes = []
    start, count = 0, len(counted)
    while start < count:
        window = _WINDOW
        while True:
            stop = min(start + window, count)
            longest = np.maximum.accumulate(counted[start:stop])
            taken = np.arange(1, stop - start + 1, dtype=np.int64)
            over = np.flatnonzero(longest * taken > budget)
            exact = np.flatnonzero(longest * taken == budget)
            if len(over) or len(exact) or stop == count:
                break
            window *= 2
        ends = [int(over[0]) if len(over) else None, int(exact[0]) + 1 if len(exact) else None]
        # a sample past the budget ends it before that sample (never the first: it fits alone)
        end = min(end for end in ends if end is not None) if any(end is not None for end in ends) else None
        if end is None:
            break  # the rest fits without meeting the budget: not done
        sizes.append(end)
        start += end
    return np.array(sizes, dtype=np.int64)

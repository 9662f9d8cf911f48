"""Draw a dataset by a token budget: entries, under a render spec, until their tokens reach it.

The same rules as the ``exact`` draw, in tokens instead of entries: a budget larger than the
dataset takes whole passes over it first, and what is left of the budget takes distinct entries
in a seeded random order. The last entry is the one, of those not yet taken, that brings the
total closest to the budget (or none, when stopping short is closer; on a tie, the one that
meets the budget), so a draw misses its budget by less than one entry's length. Only entries
that train under the spec are ever drawn: one that is dropped or has nothing to supervise would
spend no compute and fill no budget.

A draw is :class:`~.sampling.Draw` parts, as every draw is: whole passes are one
``OffsetRange`` (or a ``Selected`` mask of the training entries when some do not train), the
remainder one mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from .sampling import Draw, OffsetRange, Part, Selected


@dataclass(frozen=True)
class Lengths:
    """One dataset's entries under a spec: each entry's length as the budget counts it, and
    whether it trains (both indexed by offset in the dataset)."""

    lengths: np.ndarray
    trains: np.ndarray

    def eligible(self) -> np.ndarray:
        """Entries a budget may draw: those that train and count at least one token."""
        return self.trains & (self.lengths > 0)


def budget_draw(lengths: Lengths, budget: int, seed: int, *, dataset: str = "", key: str = "tokens") -> Draw:
    """Offsets of one dataset whose lengths add up to ``budget``, within one entry's length.

    Example::

        >>> chosen = budget_draw(Lengths(np.array([3, 5, 2]), np.ones(3, bool)), 12, seed=0)
        >>> int(np.array([3, 5, 2])[chosen.offsets()].sum())
        12
    """
    n = len(lengths.lengths)
    eligible = lengths.eligible()
    counted = np.where(eligible, lengths.lengths, 0).astype(np.int64)
    total = int(counted.sum())
    if total == 0:
        raise UsageError(f"dataset '{dataset}': key '{key}': no entry trains with a {key.replace('_', ' ')} count "
                         "under the spec, so no budget can be met (dataidx info says why entries do not train under "
                         "each spec)")
    passes, remainder = divmod(budget, total)
    parts: list[Part] = []
    if passes:
        parts.append(OffsetRange(0, n, passes) if bool(eligible.all()) else Selected(eligible, passes))
    if remainder:
        parts.append(Selected(_remainder_mask(counted, eligible, remainder, seed)))
    return Draw(n, tuple(parts))


def _remainder_mask(counted: np.ndarray, eligible: np.ndarray, remainder: int, seed: int) -> np.ndarray:
    """Distinct eligible entries, in a seeded random order, whose lengths come closest to ``remainder``."""
    candidates = np.flatnonzero(eligible)
    keys = np.random.Generator(np.random.PCG64(seed)).random(len(candidates))
    order = candidates[np.argsort(keys, kind="stable")]
    del keys, candidates
    running = np.cumsum(counted[order])
    short = int(np.searchsorted(running, remainder, side="left"))  # entries whose total stays below it
    below = int(running[short - 1]) if short else 0
    gap = remainder - below  # > 0: running[-1] is the whole dataset, more than the remainder
    rest = counted[order[short:]]
    best = int(np.argmin(np.abs(rest - gap) * 2 - (rest >= gap)))  # closest; on a tie, the one that meets it
    take = order[:short]
    if abs(int(rest[best]) - gap) <= gap:
        take = np.append(take, order[short + best])
    mask = np.zeros(len(counted), dtype=bool)
    mask[take] = True
    return mask

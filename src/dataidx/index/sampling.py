"""Seeded resampling of one dataset's entries by ``size`` then ``weight``, as counts are exact.

LLaMA-Factory v1 draws with unseeded ``random.choices``, so shrinking a dataset duplicates rows
and no two runs agree. Here every draw comes from an explicit seed derived from the mixture seed
and the dataset's name (adding a dataset never changes another's draw), and the default
``exact`` mode takes distinct entries when shrinking and whole repeats plus a distinct
remainder when growing. ``replacement`` reproduces v1's semantics, seeded.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence

from ..errors import UsageError
from ..spec import SAMPLING_MODES


def check_sampling(sampling: str) -> None:
    if sampling not in SAMPLING_MODES:
        raise UsageError(f"unknown sampling '{sampling}' (known: {', '.join(SAMPLING_MODES)})")


def derive_seed(mixture_seed: int, dataset: str) -> int:
    """A dataset's own seed: a 63-bit hash of the mixture seed and the dataset name."""
    digest = hashlib.sha256(f"{mixture_seed}\x00{dataset}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def exact_draw(n: int, k: int, rng: random.Random) -> list[int]:
    """``k`` indices of ``range(n)``: each ``k // n`` times, plus ``k % n`` distinct ones, sorted."""
    if n == 0:
        return []
    repeats, remainder = divmod(k, n)
    return list(range(n)) * repeats + sorted(rng.sample(range(n), remainder))


def replacement_draw(n: int, k: int, rng: random.Random) -> list[int]:
    """``k`` indices drawn with replacement, in draw order (v1's ``random.choices``)."""
    if n == 0:
        return []
    return rng.choices(range(n), k=k)


DRAWS: dict[str, Callable[[int, int, random.Random], list[int]]] = {
    "exact": exact_draw,
    "replacement": replacement_draw,
}


def requested_count(n: int, size: int | None, weight: float | None) -> int:
    """How many entries ``size`` then ``weight`` ask for out of ``n``."""
    k = n if size is None else size
    return k if weight is None else int(k * weight)


def resample(entries: Sequence[int], size: int | None, weight: float | None, sampling: str, seed: int) -> list[int]:
    """Adjust one dataset's entries: ``size`` first, then ``weight`` (``k = int(len * weight)``).

    Example::

        >>> resample(range(4), size=2, weight=None, sampling="exact", seed=1)
        [1, 2]
    """
    draw = DRAWS[sampling]
    rng = random.Random(seed)
    chosen = list(entries)
    if size is not None:
        chosen = [chosen[i] for i in draw(len(chosen), size, rng)]
    if weight is not None:
        chosen = [chosen[i] for i in draw(len(chosen), int(len(chosen) * weight), rng)]
    return chosen

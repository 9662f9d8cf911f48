"""Seeded resampling of one dataset's entries by ``size`` then ``weight``, as counts are exact.

LLaMA-Factory v1 draws with unseeded ``random.choices``, so shrinking a dataset duplicates rows
and no two runs agree. Here every draw comes from an explicit seed derived from the mixture seed
and the dataset's name (adding a dataset never changes another's draw), and the default
``exact`` mode takes distinct entries when shrinking and whole repeats plus a distinct
remainder when growing. ``replacement`` reproduces v1's semantics, seeded.

A draw holds no Python object per entry, so a mixture of tens of millions of entries is drawn in
bounded memory: whole passes are one :class:`OffsetRange`, an exact remainder is a mask over the
dataset (the sorted sample), and only draws with replacement are arrays of offsets. Each draw
takes its numbers from the generator exactly as ``random.sample`` and ``random.choices`` on
``range(n)`` do, so a stored seed draws the same entries as it always did
(tests/test_chunked_writes.py compares them).
"""

from __future__ import annotations

import hashlib
import math
import random
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..spec import SAMPLING_MODES

#: Offsets handed out per chunk by :meth:`Draw.chunks`, and drawn or counted at a time.
OFFSETS_PER_CHUNK = 1 << 20


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start .. start + length - 1`` in order, ``times`` times over (whole passes)."""

    start: int
    length: int
    times: int = 1


@dataclass(frozen=True)
class Selected:
    """The offsets where ``mask`` is set, in increasing order (an exact sample, sorted), ``times``
    times over."""

    mask: np.ndarray
    times: int = 1


@dataclass(frozen=True)
class Picks:
    """Offsets in draw order (with replacement, or a draw of a draw)."""

    offsets: np.ndarray


Part = OffsetRange | Selected | Picks


@dataclass(frozen=True)
class Draw:
    """Which offsets of a dataset of ``n`` entries a mixture takes, in mixture order."""

    n: int
    parts: tuple[Part, ...]

    def __len__(self) -> int:
        return sum(_part_length(part) for part in self.parts)

    def chunks(self, size: int = OFFSETS_PER_CHUNK) -> Iterator[OffsetRange | np.ndarray]:
        """The offsets in order: an :class:`OffsetRange` (one pass, ``times`` 1) or an array of at most
        about ``size`` offsets at a time."""
        for part in self.parts:
            if isinstance(part, OffsetRange):
                for _ in range(part.times):
                    yield OffsetRange(part.start, part.length)
            elif isinstance(part, Selected):
                for _ in range(part.times):
                    for start in range(0, len(part.mask), size):
                        found = np.flatnonzero(part.mask[start : start + size])
                        if len(found):
                            yield found + start
            else:
                for start in range(0, len(part.offsets), size):
                    yield part.offsets[start : start + size]

    def offsets(self) -> np.ndarray:
        """Every offset in order as one array: for small draws and for drawing from a draw."""
        pieces = [np.arange(c.start, c.start + c.length) if isinstance(c, OffsetRange) else c for c in self.chunks()]
        return np.concatenate(pieces).astype(np.int64) if pieces else np.zeros(0, dtype=np.int64)

    def counts(self) -> np.ndarray:
        """How many times each offset ``0 .. n - 1`` is drawn."""
        counts = np.zeros(self.n, dtype=np.int32 if len(self) < 2**31 else np.int64)
        for part in self.parts:
            if isinstance(part, OffsetRange):
                counts[part.start : part.start + part.length] += part.times
            elif isinstance(part, Selected):
                counts += part.mask * np.asarray(part.times, dtype=counts.dtype)
            else:
                for start in range(0, len(part.offsets), OFFSETS_PER_CHUNK):
                    unique, repeats = np.unique(part.offsets[start : start + OFFSETS_PER_CHUNK], return_counts=True)
                    counts[unique] += repeats
        return counts

    def of(self, inner: Draw) -> Draw:
        """This draw taken over the sequence ``inner`` draws (``size`` first, then ``weight``)."""
        if inner.parts == (OffsetRange(0, inner.n),):
            return Draw(inner.n, self.parts)
        chosen = inner.offsets()
        parts: list[Part] = []
        for part in self.parts:
            if isinstance(part, OffsetRange):
                parts += [Picks(chosen[part.start : part.start + part.length])] * part.times
            elif isinstance(part, Selected):
                parts += [Picks(chosen[part.mask])] * part.times
            else:
                parts.append(Picks(chosen[part.offsets]))
        return Draw(inner.n, tuple(parts))


def _part_length(part: Part) -> int:
    if isinstance(part, OffsetRange):
        return part.length * part.times
    if isinstance(part, Selected):
        return int(np.count_nonzero(part.mask)) * part.times
    return len(part.offsets)


def check_sampling(sampling: str) -> None:
    if sampling not in SAMPLING_MODES:
        raise UsageError(f"unknown sampling '{sampling}' (known: {', '.join(SAMPLING_MODES)})")


def derive_seed(mixture_seed: int, dataset: str) -> int:
    """A dataset's own seed: a 63-bit hash of the mixture seed and the dataset name."""
    digest = hashlib.sha256(f"{mixture_seed}\x00{dataset}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def epoch_seed(mixture_seed: int, epoch: int) -> int:
    """The seed epoch ``epoch`` draws with: the mixture seed itself for epoch 0 (so a mixture of
    one epoch draws as it always did), a 63-bit hash of both for later epochs."""
    if epoch == 0:
        return mixture_seed
    digest = hashlib.sha256(f"{mixture_seed}\x00epoch\x00{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def sample_mask(n: int, k: int, rng: random.Random) -> np.ndarray:
    """The set ``rng.sample(range(n), k)`` chooses, as a mask, taking the same numbers from ``rng``.

    CPython's algorithm, with a byte per entry for its set (or a machine integer for its pool)
    instead of a Python int: 1-8 bytes an entry instead of about 40.
    """
    if not 0 <= k <= n:
        raise ValueError("Sample larger than population or is negative")
    # What random.sample itself calls: a private method of CPython's Random, which typeshed leaves out.
    randbelow = rng._randbelow  # pyright: ignore[reportAttributeAccessIssue]
    chosen = bytearray(n)
    setsize = 21
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    if n <= setsize:
        pool = array("q")
        pool.frombytes(np.arange(n, dtype=np.int64).tobytes())
        for i in range(k):
            j = randbelow(n - i)
            chosen[pool[j]] = 1
            pool[j] = pool[n - i - 1]
    else:
        for _ in range(k):
            j = randbelow(n)
            while chosen[j]:
                j = randbelow(n)
            chosen[j] = 1
    return np.frombuffer(chosen, dtype=bool)


def exact(n: int, k: int, rng: random.Random) -> Draw:
    """``k`` offsets of ``range(n)``: each ``k // n`` times, plus ``k % n`` distinct ones, sorted."""
    if n == 0:
        return Draw(0, ())
    repeats, remainder = divmod(k, n)
    parts: list[Part] = [OffsetRange(0, n, repeats)] if repeats else []
    if remainder:
        parts.append(Selected(sample_mask(n, remainder, rng)))
    return Draw(n, tuple(parts))


def with_replacement(n: int, k: int, rng: random.Random) -> Draw:
    """``k`` offsets drawn with replacement, in draw order: ``rng.choices(range(n), k=k)``."""
    if n == 0:
        return Draw(0, ())
    uniform, scale, floor = rng.random, float(n), math.floor
    offsets = np.empty(k, dtype=np.int64)
    for start in range(0, k, OFFSETS_PER_CHUNK):
        count = min(OFFSETS_PER_CHUNK, k - start)
        offsets[start : start + count] = np.fromiter((floor(uniform() * scale) for _ in range(count)), np.int64, count)
    return Draw(n, (Picks(offsets),))


DRAWS: dict[str, Callable[[int, int, random.Random], Draw]] = {
    "exact": exact,
    "replacement": with_replacement,
}


def requested_count(n: int, size: int | None, weight: float | None) -> int:
    """How many entries ``size`` then ``weight`` ask for out of ``n``."""
    k = n if size is None else size
    return k if weight is None else int(k * weight)


def draw(n: int, size: int | None, weight: float | None, sampling: str, seed: int) -> Draw:
    """One dataset of ``n`` entries adjusted: ``size`` first, then ``weight`` (``k = int(len * weight)``)."""
    make = DRAWS[sampling]
    rng = random.Random(seed)
    chosen = Draw(n, (OffsetRange(0, n),) if n else ())
    if size is not None:
        chosen = make(n, size, rng)
    if weight is not None:
        chosen = make(len(chosen), int(len(chosen) * weight), rng).of(chosen)
    return chosen


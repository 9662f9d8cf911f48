"""A training order: the sequence in which a run reads a dataset's items, per epoch, as a pure
function of the dataset's length, a shuffle seed and the epoch.

Item ``order[k]`` of an epoch is computed on its own, in O(1): a keyed Feistel permutation of
``[0, 2^bits)`` (the smallest even ``bits`` with ``2^bits >= length``), walked until it lands
below ``length`` (cycle walking keeps it a bijection of ``[0, length)``). Nothing is stored and
nothing is replayed, so a run resumes at sample ``k`` of an epoch at no cost whatever came
before, and ``dataidx steps`` answers which items step ``s`` read without the run having logged
anything. The round keys come from BLAKE2b of ``(seed, epoch, length)``: another seed, epoch or
length is another order, and the same three give the same order on any machine.

Example::

    order = TrainingOrder(1_000_000, seed=0, epoch=2)
    order.items(0, 8)          # the first 8 items the epoch reads
    order.index_of(order.items(5, 6))   # [5]: where an item falls in the order
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

#: Feistel rounds: four make a pseudo-random permutation (Luby-Rackoff); two more for small domains.
ROUNDS = 6
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit (uint64, wrapping)."""
    z = values + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


class TrainingOrder:
    """The order of epoch ``epoch`` over ``length`` items under shuffle seed ``seed``.

    ``seed=None`` reads the items in their own order (no shuffle), for a mixture whose stored
    draw is already the order wanted.
    """

    def __init__(self, length: int, *, seed: int | None, epoch: int = 0) -> None:
        if length < 0:
            raise ValueError(f"an order's length is 0 or more, not {length}")
        self.length, self.seed, self.epoch = length, seed, epoch
        bits = max(2, int(length - 1).bit_length() if length > 1 else 2)
        bits += bits % 2
        self._half = np.uint64(bits // 2)
        self._mask = np.uint64((1 << (bits // 2)) - 1)
        digest = hashlib.blake2b(f"dataidx order {seed} {epoch} {length}".encode(), digest_size=8 * ROUNDS).digest()
        self._keys = [np.uint64(key) for key in struct.unpack(f"<{ROUNDS}Q", digest)]

    def __len__(self) -> int:
        return self.length

    def items(self, start: int, stop: int) -> np.ndarray:
        """The items at order indices ``start .. stop - 1`` (int64), each computed on its own."""
        if not 0 <= start <= stop <= self.length:
            raise IndexError(f"order indices {start}..{stop} are outside an epoch of {self.length} items")
        return self.at(np.arange(start, stop, dtype=np.int64))

    def at(self, indices: np.ndarray) -> np.ndarray:
        """The items at order indices ``indices`` (each in ``[0, length)``)."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.seed is None or self.length <= 1:
            return indices.copy()
        return self._walk(indices.astype(np.uint64), self._forward).astype(np.int64)

    def index_of(self, items: np.ndarray) -> np.ndarray:
        """Where each of ``items`` falls in the order: the inverse of :meth:`at`."""
        items = np.asarray(items, dtype=np.int64)
        if self.seed is None or self.length <= 1:
            return items.copy()
        return self._walk(items.astype(np.uint64), self._backward).astype(np.int64)

    def _walk(self, values: np.ndarray, step: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Apply the permutation of the power-of-two domain until every value is below ``length``."""
        out = step(values)
        outside = np.flatnonzero(out >= np.uint64(self.length))
        while outside.size:
            out[outside] = step(out[outside])
            outside = outside[out[outside] >= np.uint64(self.length)]
        return out

    def _forward(self, values: np.ndarray) -> np.ndarray:
        left, right = values >> self._half, values & self._mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self._half) | right

    def _backward(self, values: np.ndarray) -> np.ndarray:
        left, right = values >> self._half, values & self._mask
        for key in reversed(self._keys):
            left, right = right ^ (_mix(left ^ key) & self._mask), left
        return (left << self._half) | right


def epoch_steps(length: int, global_batch_size: int, tail: str = "trim") -> int:
    """Global steps in an epoch of ``length`` items read from its start: full batches only
    (``trim``), or the last one filled from the epoch's start (``pad``)."""
    if tail == "pad":
        return -(-length // global_batch_size)
    return length // global_batch_size


class RunNumbering:
    """Global steps as a trainer numbers them: from 1, counted across epochs, each an optimizer
    step of ``accumulation`` sampler steps (the last of an epoch takes what is left), as
    ``transformers.Trainer``'s and LLaMA-Factory v1's ``global_step`` count. A sampler numbers its
    steps from 0 within each epoch (what ``dataidx steps --epoch`` and the ``order_steps`` view
    count); this converts between the two.

    ``epoch_steps`` are the sampler steps of each stored epoch; epoch ``e`` has those of stored
    epoch ``e % len(epoch_steps)``, as a trainer's ``set_epoch`` serves it.

    Example::

        numbering = RunNumbering([48])      # 48 steps an epoch, no accumulation
        numbering.locate(1201)              # (25, 0, 0): epoch 25, its sampler step 0
        numbering.global_step(25, 0)        # 1201
    """

    def __init__(self, epoch_steps: Sequence[int], accumulation: int = 1) -> None:
        if accumulation < 1:
            raise ValueError(f"gradient accumulation is 1 step or more, not {accumulation}")
        self.epoch_steps, self.accumulation = list(epoch_steps), accumulation
        self.updates = [-(-steps // accumulation) for steps in self.epoch_steps]  # optimizer steps an epoch
        self._before = np.cumsum([0, *self.updates]).tolist()  # optimizer steps before each stored epoch
        self.cycle = self._before[-1]  # optimizer steps of one pass over the stored epochs

    def locate(self, global_step: int) -> tuple[int, int, int]:
        """``(epoch, first, last)``: the epoch, and its sampler steps (from 0), that trainer step
        ``global_step`` (from 1) read."""
        if global_step < 1:
            raise IndexError(f"a trainer's global steps count from 1, not {global_step}")
        if not self.cycle:
            raise IndexError(f"no epoch has a step (sampler steps an epoch: {self.epoch_steps})")
        cycles, within = divmod(global_step - 1, self.cycle)
        stored = bisect_right(self._before, within) - 1
        update = within - self._before[stored]
        first = update * self.accumulation
        last = min(first + self.accumulation, self.epoch_steps[stored]) - 1
        return cycles * len(self.epoch_steps) + stored, first, last

    def steps_in(self, epoch: int) -> int:
        """Sampler steps of epoch ``epoch``."""
        return self.epoch_steps[epoch % len(self.epoch_steps)]

    def global_step(self, epoch: int, step: int) -> int:
        """The trainer's global step (from 1) of sampler step ``step`` (from 0) of epoch ``epoch``."""
        cycles, stored = divmod(epoch, len(self.epoch_steps))
        return cycles * self.cycle + self._before[stored] + step // self.accumulation + 1


def step_items(order: TrainingOrder | SkippingOrder, global_batch_size: int, first: int, last: int,
               tail: str = "trim") -> list[tuple[int, int, int]]:
    """``(step, order index, item)`` of global steps ``first .. last`` of an epoch read from its
    start in batches of ``global_batch_size`` (a padded last step wraps to the epoch's start)."""
    steps = epoch_steps(order.length, global_batch_size, tail)
    if not 0 <= first <= last < steps:
        raise IndexError(f"steps {first}..{last} are outside epoch {order.epoch}, which has {steps} "
                         f"step{'' if steps == 1 else 's'} of {global_batch_size} items ({order.length} items, "
                         f"tail {tail})")
    indices = np.arange(first * global_batch_size, (last + 1) * global_batch_size, dtype=np.int64)
    items = order.at(indices % order.length).tolist()
    return [(int(index) // global_batch_size, int(index), item) for index, item in zip(indices.tolist(), items)]


class SkippingOrder:
    """An order without some of its items (a mixture's skip lists): what a run reads.

    ``skipped`` items are left out; the rest keep their relative order. Indices of this order
    (``at``) are what steps count; a position in the whole order (``whole_index``) is what a state
    records, so a run resumes at the same place whatever lists were added since.
    """

    def __init__(self, order: TrainingOrder, skipped: np.ndarray) -> None:
        self.order, self.epoch = order, order.epoch
        items = np.unique(np.asarray(skipped, dtype=np.int64))
        items = items[(items >= 0) & (items < order.length)]
        #: where each skipped item falls in the whole order, sorted
        self._gaps = np.sort(order.index_of(items)) if items.size else np.empty(0, dtype=np.int64)
        self.length = order.length - len(self._gaps)
        self._before = self._gaps - np.arange(len(self._gaps))  # items kept before each gap

    @property
    def skipped(self) -> int:
        """Items of the whole order left out."""
        return len(self._gaps)

    def whole_index(self, indices: np.ndarray) -> np.ndarray:
        """The index in the whole order of each of this order's ``indices``."""
        indices = np.asarray(indices, dtype=np.int64)
        return indices + np.searchsorted(self._before, indices, side="right")

    def index_at(self, whole: int) -> int:
        """This order's index of the first kept item at or after ``whole`` in the whole order."""
        return whole - int(np.searchsorted(self._gaps, whole, side="left"))

    def at(self, indices: np.ndarray) -> np.ndarray:
        """The items at this order's ``indices``."""
        return self.order.at(self.whole_index(indices))

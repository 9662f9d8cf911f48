"""``OrderSampler``: a batch sampler that reads a training order, resumable on any topology.

Every rank walks the same global order (:class:`~dataidx.read.order.TrainingOrder`, without
what the mixture's skip lists leave out): global batch ``s`` of an epoch is the order's items
``s * G .. (s + 1) * G - 1``, and rank ``r`` of ``R`` reads its ``G / R`` of them, the ``r``-th
share. So the state of a whole run is one number, the position in the epoch's order where
reading continues, whatever the world size, workers or batch size were; restored under others,
the run continues the same order at the next unread sample. Workers only fetch: the batch
sampler runs in the training process, so ``num_workers`` never changes what is read.

The epoch's tail that does not fill a global batch is trimmed on every rank alike
(``tail="trim"``), or filled with the epoch's first items (``tail="pad"``); batches count from
where the iteration started, so a run resumed with another global batch size trims only what
its own batches cannot fill. Skip lists are read when an epoch is first read (and on a
restore): a list added while a run trains applies from its next epoch or resume, at the
position the run reached; steps after a skipped item move forward to fill its place.

Example::

    sampler = OrderSampler(engine, global_batch_size=32, rank=rank, world_size=world, seed=0)
    loader = DataLoader(engine, batch_sampler=sampler, num_workers=2, collate_fn=list)
    for epoch in range(first_epoch, epochs):
        sampler.set_epoch(epoch)
        for step, batch in enumerate(loader, start=1):
            ...
            if step % 100 == 0:
                save(sampler.state_dict(step))    # steps 1..step of this iteration consumed
    # later, on any number of ranks, workers and any global batch size:
    sampler.load_state_dict(saved)
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import UsageError
from ..read import SkippingOrder, TrainingOrder
from ..store import ReadIdentity
from .state import check_reads, describe, saved_reads

#: The key that marks an order state, and its layout's version.
ORDER_KEY = "dataidx_order"
ORDER_VERSION = 1
TAILS = ("trim", "pad")
logger = logging.getLogger(__name__)


def _seed(seed: Any) -> int | None:
    """``seed`` as the order takes it: None (the dataset's own order) or a whole number (NumPy's
    and torch's too). Anything else is refused: ``"abc"`` or ``1.5`` would key an order of their
    own, one that no ``dataidx steps --seed`` can name."""
    if seed is None:
        return None
    if not isinstance(seed, bool):
        try:
            return operator.index(seed)
        except TypeError:
            pass
    raise UsageError(f"seed is a whole number, or None for the dataset's own order, not {_short(seed)}")


def _refuse_unbalancing(dataset: Any, global_batch_size: int, world_size: int, seed: int | None) -> None:
    """A plan balanced by compute for ``W`` ranks taking ``M`` packs a step is balanced only when
    read in its own order, ``W * M`` packs a step over ``W`` ranks: anything else is refused
    (a run resumed on another topology included), saying how to plan for it."""
    balanced = getattr(dataset, "balanced_for", None)
    if balanced is None:
        return
    ranks, micro_batches = balanced
    if (world_size, global_batch_size, seed) != (ranks, ranks * micro_batches, None):
        raise UsageError(f"{dataset!r} is balanced for {ranks} ranks taking {micro_batches} packs a step: read it "
                         f"with world_size={ranks}, global_batch_size={ranks * micro_batches} and seed=None (its own "
                         f"order), or plan for this run: dataidx pack ... --world-size {world_size} --micro-batches "
                         f"{max(1, global_batch_size // world_size)} --balance compute")


def _reads(dataset: Any) -> list[list[str]] | None:
    """What a dataidx dataset reads (store, mixture, spec or plan digests), or None for another."""
    state = getattr(dataset, "state_dict", None)
    if not callable(state):
        return None
    found = state()
    reads = found.get("reads") if isinstance(found, dict) else None
    return [list(part) for part in reads] if isinstance(reads, list) else None


class OrderSampler:
    """Rank ``rank`` of ``world_size``'s batches of the training order of ``dataset`` under
    ``seed`` (None: the dataset's own order), ``global_batch_size`` items a step on all ranks
    together. See the module's docstring for a training loop."""

    def __init__(self, dataset: Any, *, global_batch_size: int, rank: int = 0, world_size: int = 1,
                 seed: int | None = 0, tail: str = "trim", skips: bool = True) -> None:
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 1:
            raise UsageError(f"global_batch_size is a whole number 1 or more, not {global_batch_size!r}")
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise UsageError(f"world_size is a whole number 1 or more, not {world_size!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise UsageError(f"rank is 0..{world_size - 1} for a world of {world_size}, not {rank!r}")
        if global_batch_size % world_size:
            raise UsageError(f"a global batch of {global_batch_size} does not split evenly over {world_size} ranks")
        if tail not in TAILS:
            raise UsageError(f"tail is one of {', '.join(TAILS)}, not {tail!r}")
        self.dataset = dataset
        self.global_batch_size, self.rank, self.world_size = global_batch_size, rank, world_size
        self.seed, self.tail, self.skips = _seed(seed), tail, skips
        _refuse_unbalancing(dataset, global_batch_size, world_size, self.seed)
        self.reads = _reads(dataset)
        self.epoch = 0
        # Where the next iteration starts, and where the current one started: positions in the
        # epoch's whole order, so skip lists added meanwhile do not move them.
        self._resume = self._begin = 0
        self._yielded = 0
        self._restored = False  # a restored state not yet iterated
        self._read: tuple[int, SkippingOrder] | None = None

    def order(self) -> SkippingOrder:
        """The epoch's order as this run reads it: the whole order without what the dataset's skip
        lists (``dataidx skip``) leave out, read when the epoch is first read."""
        if self._read is None or self._read[0] != self.epoch:
            skipped = getattr(self.dataset, "skipped_items", None) if self.skips else None
            left_out = np.asarray(skipped() if callable(skipped) else [], dtype=np.int64)
            if len(left_out) and getattr(self.dataset, "balanced_for", None) is not None:
                logger.warning("%r: its skip lists leave %d packs of epoch %d out, which moves every later step "
                               "forward: the balance of those steps no longer holds; plan again with dataidx pack "
                               "... --balance compute to balance what is left", self.dataset, len(left_out),
                               self.epoch)
            whole = TrainingOrder(self.length, seed=self.seed, epoch=self.epoch)
            self._read = (self.epoch, SkippingOrder(whole, left_out))
        return self._read[1]

    @property
    def length(self) -> int:
        """Items in the epoch served (a stored mixture's epochs may differ in size)."""
        return len(self.dataset)

    @property
    def share(self) -> int:
        """Items a rank reads a step."""
        return self.global_batch_size // self.world_size

    def _steps(self, begin: int) -> int:
        """Steps of an iteration starting at ``begin`` (an index of the order read): full global
        batches, or the last one filled from the epoch's start. Batches count from ``begin``, so a
        run resumed with another batch size trims only what its own batches cannot fill."""
        left = max(0, self.order().length - begin)
        return -(-left // self.global_batch_size) if self.tail == "pad" else left // self.global_batch_size

    def __len__(self) -> int:
        """Steps the next iteration yields (the one under way, while it is): after a restore, only
        the steps left of the restored epoch. A trainer's schedule counts :attr:`steps_per_epoch`."""
        return self._steps(self.order().index_at(self._resume))

    @property
    def steps_per_epoch(self) -> int:
        """Steps of the epoch read from its start: what a trainer's schedule counts an epoch as."""
        return self._steps(0)

    def progress(self, steps_done: int) -> float:
        """The epochs read once ``steps_done`` steps of the current iteration are consumed: the
        epoch, plus the share of its steps read, the steps before a restore counted (in this global
        batch size). What a trainer logs as its epoch; ``transformers.Trainer`` counts from the
        restored step instead (docs/training-orders.md)."""
        steps = self._checked_steps(steps_done)
        whole = self.steps_per_epoch
        read = self.order().index_at(self._begin) / self.global_batch_size + steps
        return self.epoch + (min(read / whole, 1.0) if whole else 1.0)

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` from now on (from its start, unless a restored state is in it); a
        dataset with ``set_epoch`` (DataEngine, PackedDataset) serves that epoch too."""
        if epoch != self.epoch:
            if self._restored:  # the rest of the restored epoch would go unread, in silence
                logger.warning("OrderSampler.set_epoch(%d) leaves the restored state's epoch %d unread from item "
                               "%d of its order on (a trainer resumed with another global batch size counts its "
                               "epochs anew: docs/training-orders.md)", epoch, self.epoch, self._resume)
            self.epoch, self._resume, self._restored = epoch, 0, False
            self._begin = self._yielded = 0  # a state now is one at the new epoch's start
        self._serve(epoch)

    def _serve(self, epoch: int) -> None:
        serve = getattr(self.dataset, "set_epoch", None)
        if callable(serve):
            serve(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        order = self.order()
        self._begin, self._yielded, self._restored = self._resume, 0, False
        first = order.index_at(self._begin) + self.rank * self.share
        mine = np.arange(self.share, dtype=np.int64)
        for step in range(self._steps(order.index_at(self._begin))):
            indices = first + step * self.global_batch_size + mine
            self._yielded += 1
            yield order.at(indices % order.length).tolist()
        self._resume = 0  # the epoch was read to its end: iterating it again reads it whole

    def state_dict(self, steps_done: int | None = None) -> dict[str, Any]:
        """The run's state once ``steps_done`` steps of the current iteration are consumed (default:
        every step this sampler has yielded, right without workers prefetching): one global
        position (in the epoch's whole order, skipped items counted), and what it is a position in."""
        steps = self._checked_steps(steps_done)
        order = self.order()
        read = order.index_at(self._begin) + steps * self.global_batch_size
        position = int(order.whole_index(np.asarray([read]))[0]) if read < order.length else self.length
        return {ORDER_KEY: ORDER_VERSION, "epoch": self.epoch, "position": position, "seed": self.seed,
                "length": self.length, "tail": self.tail, "reads": self.reads}

    def _checked_steps(self, steps_done: int | None) -> int:
        """``steps_done`` (default: every step yielded), refused past the steps this iteration has
        yielded: a count past them is not a state of this run, and clamped it would resume past
        steps never trained."""
        steps = self._yielded if steps_done is None else steps_done
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise UsageError(f"steps_done is a whole number 0 or more, not {_short(steps)}")
        if steps > self._yielded:
            raise UsageError(f"steps_done is {steps}, but this iteration of epoch {self.epoch} has yielded "
                             f"{self._yielded} steps: count the steps consumed since it began")
        return steps

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next iteration of its epoch starts at the first sample not
        consumed. ``state`` is this sampler's state, or a torchdata ``StatefulDataLoader``'s that
        holds one (its own refuses another worker count; the sampler's does not). A state saved
        over other data, another seed or tail is refused in one line."""
        state = _order_state(state)
        if not isinstance(state, dict) or state.get(ORDER_KEY) != ORDER_VERSION:
            raise UsageError(f"not a dataidx order state of layout {ORDER_VERSION}")
        self._check_reads(state.get("reads"))
        for key, mine in (("seed", self.seed), ("tail", self.tail)):
            if state.get(key) != mine:
                raise UsageError(f"this order state was saved with {key} {_short(state.get(key))}; this sampler "
                                 f"has {_short(mine)}: it reads another order")
        epoch, position = state.get("epoch"), state.get("position")
        for key, value in (("epoch", epoch), ("position", position)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"an order state's {key} is a whole number 0 or more, not {_short(value)}")
        assert isinstance(epoch, int) and isinstance(position, int)
        self._serve(epoch)
        if self.reads is None and state.get("length") != self.length:  # not a dataidx dataset: its size says
            raise UsageError(f"this order state was saved over {_short(state.get('length'))} items; this dataset "
                             f"has {self.length}: it reads another order")
        if position > self.length:  # the epoch's end is the furthest a run can have read
            raise UsageError(f"an order state's position is 0..{self.length} in epoch {epoch} of {self.length} "
                             f"items, not {_short(position)}: it would resume past the epoch and read nothing")
        self.epoch, self._resume, self._read = epoch, position, None  # skip lists are read again
        self._begin, self._yielded, self._restored = position, 0, True

    def _check_reads(self, saved: Any) -> None:
        """Refuse a state saved over other data, naming what it was saved over and what this
        sampler reads (the store's mixture, spec or plan; digests say nothing to a reader)."""
        if saved == self.reads:
            return
        what = "order state"
        if self.reads is None or saved is None:
            said = [describe(saved_reads(reads, f"an {what}")) if reads is not None
                    else "a dataset that is not a dataidx store's" for reads in (saved, self.reads)]
            raise UsageError(f"this {what} was saved over {said[0]}; this sampler reads {said[1]}: it reads "
                             "another order")
        mine = ReadIdentity(tuple((kind, name, digest) for kind, name, digest in self.reads))
        check_reads(saved_reads(saved, f"an {what}"), mine, what=what)


def _order_state(state: Any) -> Any:
    """The order state in ``state``: itself, or where a ``StatefulDataLoader`` state keeps its
    batch sampler's (at the top without workers, in the main process's snapshot with them)."""
    if isinstance(state, dict) and ORDER_KEY not in state:
        snapshot = state.get("_snapshot")
        main = snapshot.get("_main_snapshot") if isinstance(snapshot, dict) else state
        if isinstance(main, dict) and isinstance(main.get("_index_sampler_state"), dict):
            return main["_index_sampler_state"]
    return state


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

"""``OrderSampler``: a batch sampler that reads a training order, resumable on any topology.

Every rank walks the same global order (:class:`~dataidx.read.order.TrainingOrder`): global
batch ``s`` of an epoch is order items ``s * G .. (s + 1) * G - 1``, and rank ``r`` of ``R``
reads its ``G / R`` of them, the ``r``-th share. So the state of a whole run is one number, the
samples of the epoch consumed, whatever the world size, the workers or the batch size were;
restored under others, the run continues the same order at the next unread sample. Workers only
fetch: the batch sampler runs in the training process, so ``num_workers`` never changes what is
read. The epoch's tail that does not fill a global batch is trimmed on every rank alike
(``tail="trim"``), or filled with the epoch's first items (``tail="pad"``); batches count from
where the iteration started, so a run resumed with another global batch size trims only what
its own batches cannot fill.

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

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import UsageError
from ..read import TrainingOrder

#: The key that marks an order state, and its layout's version.
ORDER_KEY = "dataidx_order"
ORDER_VERSION = 1
TAILS = ("trim", "pad")


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
                 seed: int | None = 0, tail: str = "trim") -> None:
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
        self.seed, self.tail = seed, tail
        self.reads = _reads(dataset)
        self.epoch = 0
        self._resume = 0  # samples of the epoch the next iteration starts after
        self._begin = 0  # ... and where the current one started
        self._yielded = 0

    @property
    def length(self) -> int:
        """Items in the epoch served (a stored mixture's epochs may differ in size)."""
        return len(self.dataset)

    @property
    def share(self) -> int:
        """Items a rank reads a step."""
        return self.global_batch_size // self.world_size

    def _end(self, begin: int) -> int:
        """Order index where an iteration starting at ``begin`` stops: after its last full global
        batch, or past the epoch's end padded to a whole one. Batches count from ``begin``, so a
        run resumed with another batch size trims only what its own batches cannot fill."""
        left = max(0, self.length - begin)
        steps = -(-left // self.global_batch_size) if self.tail == "pad" else left // self.global_batch_size
        return begin + steps * self.global_batch_size

    def __len__(self) -> int:
        """Steps the next iteration yields."""
        return (self._end(self._resume) - self._resume) // self.global_batch_size

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` from now on (from its start, unless a restored state is in it); a
        dataset with ``set_epoch`` (DataEngine, PackedDataset) serves that epoch too."""
        if epoch != self.epoch:
            self.epoch, self._resume = epoch, 0
        self._serve(epoch)

    def _serve(self, epoch: int) -> None:
        serve = getattr(self.dataset, "set_epoch", None)
        if callable(serve):
            serve(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        order = TrainingOrder(self.length, seed=self.seed, epoch=self.epoch)
        self._begin, self._yielded = self._resume, 0
        mine = self._begin + self.rank * self.share
        for step in range(len(self)):
            start = mine + step * self.global_batch_size
            indices = [index % self.length for index in range(start, start + self.share)]
            self._yielded += 1
            yield order.at(np.asarray(indices)).tolist()
        self._resume = 0  # the epoch was read to its end: iterating it again reads it whole

    def state_dict(self, steps_done: int | None = None) -> dict[str, Any]:
        """The run's state once ``steps_done`` steps of the current iteration are consumed (default:
        every step this sampler has yielded, right without workers prefetching): one global
        position, and what it is a position in."""
        steps = self._yielded if steps_done is None else steps_done
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise UsageError(f"steps_done is a whole number 0 or more, not {steps!r}")
        consumed = min(self._begin + steps * self.global_batch_size, self._end(self._begin))
        return {ORDER_KEY: ORDER_VERSION, "epoch": self.epoch, "consumed": consumed, "seed": self.seed,
                "length": self.length, "tail": self.tail, "reads": self.reads}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next iteration of its epoch starts at the first sample not
        consumed. ``state`` is this sampler's state, or a torchdata ``StatefulDataLoader``'s that
        holds one (its own refuses another worker count; the sampler's does not). A state saved
        over other data, another seed or tail is refused in one line."""
        state = _order_state(state)
        if not isinstance(state, dict) or state.get(ORDER_KEY) != ORDER_VERSION:
            raise UsageError(f"not a dataidx order state of layout {ORDER_VERSION}")
        for key, mine in (("reads", self.reads), ("seed", self.seed), ("tail", self.tail)):
            if state.get(key) != mine:
                raise UsageError(f"this order state was saved with {key} {_short(state.get(key))}; this sampler "
                                 f"has {_short(mine)}: it reads another order")
        epoch, consumed = state.get("epoch"), state.get("consumed")
        for key, value in (("epoch", epoch), ("consumed", consumed)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"an order state's {key} is a whole number 0 or more, not {_short(value)}")
        assert isinstance(epoch, int) and isinstance(consumed, int)
        self._serve(epoch)
        if self.reads is None and state.get("length") != self.length:  # not a dataidx dataset: its size says
            raise UsageError(f"this order state was saved over {_short(state.get('length'))} items; this dataset "
                             f"has {self.length}: it reads another order")
        self.epoch, self._resume = epoch, consumed
        self._begin, self._yielded = consumed, 0


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

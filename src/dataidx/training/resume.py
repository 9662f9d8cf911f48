"""Resume a ``StatefulDataLoader`` over a dataidx dataset with another number of workers.

torchdata's ``StatefulDataLoader`` (what LLaMA-Factory v1's ``BatchGenerator`` uses) saves a
state whose layout depends on ``num_workers`` and refuses to load it into a loader with another
count. Item ``i`` of a dataidx dataset is a function of the store and the epoch served alone, so
a loader's state is its sampler's position, the number of batches it yielded and the dataset's
own small state (:mod:`.state`: that epoch and what it read), and that can be re-expressed for
any number of workers. The keys are torchdata's (0.10, 0.11).
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .state import is_dataset_state

_MAIN_KEYS = ("_IterableDataset_len_called", "_index_sampler_state", "_sampler_iter_state",
              "_sampler_iter_yielded", "_shared_seed")


def loader_state_for_workers(state: dict[str, Any], num_workers: int, *, dataset: Any = None) -> dict[str, Any]:
    """``state`` (from ``StatefulDataLoader.state_dict()``) in the layout of a loader with
    ``num_workers`` workers, to pass to that loader's ``load_state_dict``.

    The dataset state it carries (the epoch a ``DataEngine`` or ``PackedDataset`` served, and
    what it read) is restored by the loader itself; given ``dataset``, the one the new loader
    reads, it is checked against it and its epoch served here already, so a state saved over
    another store or mixture is refused before any worker starts.

    Example::

        saved = loader.state_dict()                     # a loader with 2 workers
        resumed = StatefulDataLoader(engine, sampler=sampler, num_workers=4, ...)
        resumed.load_state_dict(loader_state_for_workers(saved, 4, dataset=engine))
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise UsageError(f"num_workers must be a whole number 0 or more, got {num_workers!r:.60}")
    main, steps, workers = _position(state)
    saved = _dataset_state(workers)
    if dataset is not None and saved is not None:
        dataset.load_state_dict(saved)
    finished = state["_iterator_finished"]
    if num_workers == 0:
        return {**{key: main[key] for key in _MAIN_KEYS}, "_num_yielded": steps,
                "_iterator_finished": finished, "dataset_state": saved, "fetcher_state": None}
    snapshot = {
        "_snapshot_step": steps,
        "_last_yielded_worker_id": (steps - 1) % num_workers if steps else -1,
        "_main_snapshot": {**{key: main[key] for key in _MAIN_KEYS}, "_num_workers": num_workers,
                           "_base_seed": main.get("_base_seed", 0)},
        "_worker_snapshots": {f"worker_{i}": {"worker_id": i, "dataset_state": saved, "fetcher_state": None}
                              for i in range(num_workers)},
    }
    return {"_snapshot": snapshot, "_steps_since_snapshot": 0, "_iterator_finished": finished}


def _dataset_state(workers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The dataidx dataset state every worker recorded (None for none), or a UsageError for any other."""
    states = []
    for worker in workers:
        if worker.get("fetcher_state") is not None or not (worker.get("dataset_state") is None
                                                           or is_dataset_state(worker["dataset_state"])):
            raise UsageError("this loader state holds a dataset's own iteration state; only states of loaders over "
                             "datasets without one (DataEngine, PackedDataset) can change their number of workers")
        states.append(worker.get("dataset_state"))
    recorded = [one for one in states if one is not None]
    if any(one != recorded[0] for one in recorded):
        epochs = sorted({str(one.get("epoch")) for one in recorded})
        raise UsageError(f"this loader state's workers served different epochs or stores (epochs {', '.join(epochs)}: "
                         "persistent workers keep the epoch they started with); it cannot be resumed as one")
    return recorded[0] if recorded else None


def _position(state: Any) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """The sampler state, the batches yielded, and the workers' states of a saved loader, each
    checked to be what torchdata writes (a UsageError naming the first that is not)."""
    if not isinstance(state, dict):
        raise UsageError(f"not a StatefulDataLoader state_dict: a {type(state).__name__}, not a dict")
    if "_snapshot" not in state:  # saved without workers
        main, steps, workers, where = state, _get(state, "_num_yielded", int, ""), [state], ""
    else:
        snapshot = _get(state, "_snapshot", dict, "")
        main = _get(snapshot, "_main_snapshot", dict, "_snapshot.")
        steps = _get(snapshot, "_snapshot_step", int, "_snapshot.")
        found = _get(snapshot, "_worker_snapshots", dict, "_snapshot.")
        workers, where = list(found.values()), "_snapshot._main_snapshot."
        if not all(isinstance(worker, dict) for worker in workers):
            raise UsageError("not a StatefulDataLoader state_dict: _snapshot._worker_snapshots holds a value "
                             "that is not a dict")
        since = _get(state, "_steps_since_snapshot", int, "")
        if since:
            raise UsageError(f"this loader state was saved {since} batches after its last snapshot "
                             "(snapshot_every_n_steps > 1, or in_order=False, which skips snapshots); save it with "
                             "snapshot_every_n_steps=1 and in_order=True to change the number of workers")
    _get(state, "_iterator_finished", bool, "")
    for key in _MAIN_KEYS:
        if key not in main:
            raise UsageError(f"not a StatefulDataLoader state_dict (missing {where}{key})")
    handed = _get(main, "_sampler_iter_yielded", int, where)
    if steps < 0 or handed != steps:
        # torchdata's in_order=False yields batches out of order and snapshots the sampler at the
        # last batch yielded in order: the batches yielded ahead of it are not in the state, and a
        # resume would read them again.
        raise UsageError(f"this loader state yielded {steps} batches, but its sampler's snapshot has handed out "
                         f"{handed} in order (a loader with in_order=False): resuming it would read "
                         f"{abs(steps - handed)} batches again or skip them; save states with in_order=True")
    return main, steps, workers


def _get(state: dict[str, Any], key: str, kind: type, where: str) -> Any:
    """``state[key]``, checked to be a ``kind``, or a UsageError naming it."""
    if key not in state:
        raise UsageError(f"not a StatefulDataLoader state_dict (missing {where}{key})")
    value = state[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise UsageError(f"not a StatefulDataLoader state_dict: {where}{key} is {type(value).__name__} "
                         f"{value!r:.60}, not {kind.__name__}")
    return value

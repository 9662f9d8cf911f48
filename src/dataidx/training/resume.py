"""Resume a ``StatefulDataLoader`` over a dataidx dataset with another number of workers.

torchdata's ``StatefulDataLoader`` (what LLaMA-Factory v1's ``BatchGenerator`` uses) saves a
state whose layout depends on ``num_workers`` and refuses to load it into a loader with another
count. dataidx's datasets keep no iteration state: item ``i`` is a function of the store alone,
so a loader's state is only its sampler's position and the number of batches it yielded, and
that can be re-expressed for any number of workers. The keys are torchdata's (0.10, 0.11).
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError

_MAIN_KEYS = ("_IterableDataset_len_called", "_index_sampler_state", "_sampler_iter_state",
              "_sampler_iter_yielded", "_shared_seed")


def loader_state_for_workers(state: dict[str, Any], num_workers: int) -> dict[str, Any]:
    """``state`` (from ``StatefulDataLoader.state_dict()``) in the layout of a loader with
    ``num_workers`` workers, to pass to that loader's ``load_state_dict``.

    Example::

        saved = loader.state_dict()                     # a loader with 2 workers
        resumed = StatefulDataLoader(engine, sampler=sampler, num_workers=4, ...)
        resumed.load_state_dict(loader_state_for_workers(saved, 4))
    """
    if num_workers < 0:
        raise UsageError(f"num_workers must be 0 or more, got {num_workers}")
    main, steps, workers = _position(state)
    for worker in workers:
        if worker.get("dataset_state") is not None or worker.get("fetcher_state") is not None:
            raise UsageError("this loader state holds a dataset's own iteration state; only states of loaders over "
                             "datasets without one (DataEngine, PackedDataset) can change their number of workers")
    if num_workers == 0:
        return {**{key: main[key] for key in _MAIN_KEYS}, "_num_yielded": steps,
                "_iterator_finished": state["_iterator_finished"], "dataset_state": None, "fetcher_state": None}
    snapshot = {
        "_snapshot_step": steps,
        "_last_yielded_worker_id": (steps - 1) % num_workers if steps else -1,
        "_main_snapshot": {**{key: main[key] for key in _MAIN_KEYS}, "_num_workers": num_workers,
                           "_base_seed": main.get("_base_seed", 0)},
        "_worker_snapshots": {f"worker_{i}": {"worker_id": i, "dataset_state": None, "fetcher_state": None}
                              for i in range(num_workers)},
    }
    return {"_snapshot": snapshot, "_steps_since_snapshot": 0, "_iterator_finished": state["_iterator_finished"]}


def _position(state: dict[str, Any]) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """The sampler state, the batches yielded, and the workers' states of a saved loader."""
    try:
        if "_snapshot" not in state:  # saved without workers
            return state, state["_num_yielded"], [state]
        snapshot = state["_snapshot"]
        if state["_steps_since_snapshot"]:
            raise UsageError("this loader state was saved between snapshots (snapshot_every_n_steps > 1); "
                             "save it with snapshot_every_n_steps=1 to change the number of workers")
        return snapshot["_main_snapshot"], snapshot["_snapshot_step"], list(snapshot["_worker_snapshots"].values())
    except (KeyError, TypeError) as exc:
        raise UsageError(f"not a StatefulDataLoader state_dict (missing {exc})") from None

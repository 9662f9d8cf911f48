"""Which positions of a mixture's epoch hold some base entries, and which entries a row has: what
a skip list (``dataidx skip``) leaves out of a training order, found without expanding the mixture."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import UsageError
from ..store import Datasets, Mixtures

#: The explicit positions of a range that hold any of some base entries (a scan of the range).
_EXPLICIT_HOLDING = Mixtures.FETCH_HOLDING

#: A reader's ``fetch``: a read template and its parameters -> rows.
Fetch = Callable[..., list[Any]]


def positions_holding(fetch: Fetch, runs: Sequence[tuple[int, int, int]], low: int, high: int,
                      entry_ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """The positions ``low .. high - 1`` (global) that hold any of base entries ``entry_ids``, as
    offsets from ``low``, sorted: by arithmetic inside ``runs`` (``(start, first entry, length)``),
    one query (a scan of the range's explicit positions) for the rest."""
    wanted = np.unique(np.asarray(entry_ids, dtype=np.int64))
    if not wanted.size:
        return np.empty(0, dtype=np.int64)
    explicit = fetch(_EXPLICIT_HOLDING, low, high - 1, json.dumps(wanted.tolist()))
    found = [np.asarray([position for position, in explicit], dtype=np.int64)]
    for start, first_entry, length in runs:
        if start + length <= low or start >= high:
            continue
        inside = wanted[np.searchsorted(wanted, first_entry): np.searchsorted(wanted, first_entry + length)]
        positions = start + inside - first_entry
        found.append(positions[(positions >= low) & (positions < high)])
    return np.unique(np.concatenate(found)) - low


def row_entries(fetch: Fetch, datasets: dict[int, Datasets.Stored], store: str, dataset: str, row: int,
                cut: int | None = None) -> list[int]:
    """The base entry ids of row ``row`` of dataset ``dataset`` (its entry of cut ``cut``, or all
    of them), in cut order; a dataset the store does not hold is a UsageError naming those it does."""
    ids = {stored.name: dataset_id for dataset_id, stored in datasets.items()}
    if dataset not in ids:
        raise UsageError(f"{store}: no dataset '{dataset}' (datasets: {', '.join(ids)})")
    return [entry_id for entry_id, entry_cut in fetch(Datasets.FETCH_ROW, ids[dataset], row)
            if cut is None or entry_cut == cut]

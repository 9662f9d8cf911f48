"""``DataEngine``: a ``torch.utils.data.Dataset`` over one mixture of a store.

The only module that imports torch. It returns the same dicts as LLaMA-Factory v1's
``DataEngine`` (``{"_dataset_name": name, **sample}`` with ``messages`` cut to the entry), but
opens instantly, holds no per-entry Python objects, and batches its reads for a DataLoader.
"""

from __future__ import annotations

import operator
import os
from typing import Any

from torch.utils.data import Dataset

from .reader import StoreReader


def _position(index: Any) -> int:
    """An integer position (NumPy and torch integers too); anything else is a TypeError."""
    if isinstance(index, bool):
        raise TypeError("DataEngine indices must be int, slice or list of int, not bool")
    try:
        return operator.index(index)
    except TypeError:
        raise TypeError(f"DataEngine indices must be int, slice or list of int, not {type(index).__name__}") from None


class DataEngine(Dataset):
    """Entries of mixture ``mixture`` of the store at ``path``, converted on fetch.

    Example::

        engine = DataEngine("demo.db")
        engine[0], engine[-1], engine[2:5], engine[[7, 3]]
        DataLoader(engine, batch_size=32, num_workers=2, collate_fn=list)
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, verify: bool = True) -> None:
        self.reader = StoreReader(path, mixture, verify=verify)

    @property
    def mixture(self) -> str:
        return self.reader.mixture

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, index: int | slice | list[int]) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return self.reader.get_many(list(range(*index.indices(len(self)))))
        if isinstance(index, list):
            return self.reader.get_many([_position(i) for i in index])
        return self.reader.get(_position(index))

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        """Batched fetch used by ``DataLoader``: one SQL query for the whole batch."""
        return self.reader.get_many([_position(i) for i in indices])

    def __repr__(self) -> str:
        return f"DataEngine({self.reader.path!r}, mixture={self.mixture!r}, entries={len(self)})"

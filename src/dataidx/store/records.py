"""The datasets and mixtures a store describes, as readers need them.

Read through a :class:`~dataidx.store.handle.StoreHandle`: opening a store for training reads
these and nothing heavier.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .handle import StoreHandle


@dataclass(frozen=True, kw_only=True)
class StoredDataset:
    """What a reader needs of one stored dataset."""

    id: int
    name: str
    path: str
    source: str
    split: str
    converter: str
    converter_version: str
    loader_version: str
    info: dict[str, Any]
    rows: int
    files: list[dict[str, Any]]
    arrow_files: list[dict[str, Any]] | None
    #: Messages the converter left out at build time (unknown roles, tool calls that are not
    #: JSON): counted there, so a reader need not report them again.
    drops: int = 0


_DATASETS = (
    "SELECT id, name, path, source, split, converter, converter_version, loader_version, info, rows, files, "
    "arrow_files, drops FROM datasets ORDER BY position"
)


def read_datasets(handle: StoreHandle) -> dict[int, StoredDataset]:
    """The stored datasets by id, in config order."""
    datasets = {}
    for (id_, name, path, source, split, converter, converter_version, loader_version, info, rows, files,
         arrow_files, drops) in handle.all(_DATASETS):
        datasets[id_] = StoredDataset(
            id=id_, name=name, path=path, source=source, split=split, converter=converter,
            converter_version=converter_version, loader_version=loader_version, info=json.loads(info or "{}"),
            rows=rows, files=json.loads(files or "[]"),
            arrow_files=None if arrow_files is None else json.loads(arrow_files), drops=drops)
    return datasets

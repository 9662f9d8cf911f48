"""The datasets and mixtures a store describes, and opening the datasets' raw rows again.

Readers need each dataset's converter, recorded Arrow files and row count; opening maps those
files (or, when they are gone, loads the source again) and refuses data that no longer matches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import StaleStoreError
from .renamed_rows import RenamedRows
from .rows import ArrowRows, DatasetRows, RowSource, arrow_files_state
from .storefile import ReadConnection, not_found


@dataclass(frozen=True)
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


def open_rows(dataset: StoredDataset) -> RowSource:
    """The dataset's raw rows, under the names its converter expects (the ``columns`` map)."""
    rows = _open_source_rows(dataset)
    columns = dataset.info.get("columns")
    return RenamedRows(rows, columns, dataset.name) if columns else rows


def _open_source_rows(dataset: StoredDataset) -> RowSource:
    """Map the recorded Arrow files; if they are gone, load the source again and check its length."""
    state = arrow_files_state(dataset.arrow_files) if dataset.arrow_files else "missing"
    if state == "changed":
        raise StaleStoreError(
            f"dataset '{dataset.name}': its Arrow data was written anew since the build; rebuild the store"
        )
    if state == "intact":
        rows = ArrowRows(dataset.arrow_files)
        if len(rows) != dataset.rows:
            raise StaleStoreError(
                f"dataset '{dataset.name}': its Arrow data holds {len(rows)} rows, the store indexed {dataset.rows}; "
                "rebuild the store"
            )
        return rows
    from .config import DatasetSpec
    from .sources import load

    spec = DatasetSpec(name=dataset.name, **dataset.info)
    loaded = load(spec)
    if len(loaded.dataset) != dataset.rows:
        raise StaleStoreError(
            f"dataset '{dataset.name}' now has {len(loaded.dataset)} rows, the store indexed {dataset.rows}; "
            "rebuild the store"
        )
    return DatasetRows(loaded.dataset)


def read_datasets(connection: ReadConnection) -> dict[int, StoredDataset]:
    """The stored datasets by id, in config order."""
    query = (
        "SELECT id, name, path, source, split, converter, converter_version, loader_version, info, rows, files, "
        "arrow_files FROM datasets ORDER BY position"
    )
    datasets = {}
    for row in connection.execute(query):
        info, files, arrow_files = (json.loads(v) if v is not None else None for v in (row[8], row[10], row[11]))
        datasets[row[0]] = StoredDataset(*row[:8], info=info, rows=row[9], files=files, arrow_files=arrow_files)
    return datasets


@dataclass(frozen=True)
class StoredMixture:
    """A mixture: its positions are global rowids ``start .. start + entries - 1``."""

    id: int
    name: str
    start: int
    entries: int


def read_mixture(connection: ReadConnection, name: str, path: str) -> StoredMixture:
    """The stored mixture ``name``, or a StoreError listing the mixtures there are."""
    row = connection.execute("SELECT id, name, start, entries FROM mixtures WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise not_found(connection, "mixtures", "mixture", name, path)
    return StoredMixture(*row)

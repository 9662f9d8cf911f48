"""Opening a stored dataset's raw rows again, in the process that reads them.

The recorded Arrow files are mapped (milliseconds, whatever their size); when they are gone the
source is loaded again, and either way rows that no longer match the index are refused.
"""

from __future__ import annotations

from ..errors import StaleStoreError
from ..sources import ArrowRows, DatasetRows, RenamedRows, RowSource, arrow_files_state, load
from ..spec import DatasetSpec
from ..store import Datasets


def open_rows(dataset: Datasets.Stored) -> RowSource:
    """The dataset's raw rows, under the names its converter expects (the ``columns`` map)."""
    rows = _open_source_rows(dataset)
    columns = dataset.info.get("columns")
    return RenamedRows(rows, columns, dataset.name) if columns else rows


def _open_source_rows(dataset: Datasets.Stored) -> RowSource:
    """Map the recorded Arrow files; if they are gone, load the source again and check its length."""
    files = dataset.arrow_files or []
    state = arrow_files_state(files) if files else "missing"
    if state == "changed":
        raise StaleStoreError(
            f"dataset '{dataset.name}': its Arrow data was written anew since the build; rebuild the store"
        )
    if state == "intact":
        rows = ArrowRows(files)
        if len(rows) != dataset.rows:
            raise StaleStoreError(
                f"dataset '{dataset.name}': its Arrow data holds {len(rows)} rows, the store indexed {dataset.rows}; "
                "rebuild the store"
            )
        return rows
    loaded = load(DatasetSpec(name=dataset.name, **dataset.info))
    if len(loaded.dataset) != dataset.rows:
        raise StaleStoreError(
            f"dataset '{dataset.name}' now has {len(loaded.dataset)} rows, the store indexed {dataset.rows}; "
            "rebuild the store"
        )
    return DatasetRows(loaded.dataset)

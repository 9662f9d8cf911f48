"""Read a mixture's entries from a store and turn them into samples, without torch.

``StoreReader`` is what ``DataEngine`` and ``dataidx show`` share: open checks the store's
schema, that the sources did not change and that each converter is the recorded version;
fetching a position is one rowid lookup, a row read from the memory-mapped Arrow data, and the
converter run on that row. Connections and mapped files are opened lazily per process, so a
reader can be pickled into DataLoader workers (fork or spawn).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from .converters import convert_row, converters
from .errors import StaleStoreError, StoreError
from .expansion import truncate
from .fingerprints import changed_files
from .rows import ArrowRows, DatasetRows, RowSource, arrow_files_intact
from .storefile import connect_readonly

_FETCH_ONE = (
    "SELECT b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id = ?"
)
_FETCH_MANY = (
    "SELECT me.id, b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id IN (SELECT value FROM json_each(?))"
)


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
    info: dict[str, Any]
    rows: int
    files: list[dict[str, Any]]
    arrow_files: list[dict[str, Any]] | None


class StoreReader:
    """Positions of one mixture of a store -> ``{"_dataset_name": ..., **sample}`` dicts.

    Example::

        reader = StoreReader("demo.db")
        reader.get(0), reader.get_many([3, 1, 2])
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, verify: bool = True) -> None:
        self.path = os.fspath(path)
        self.mixture = mixture
        connection = connect_readonly(self.path)
        try:
            self.datasets = _read_datasets(connection)
            row = connection.execute("SELECT start, entries FROM mixtures WHERE name = ?", (mixture,)).fetchone()
            if row is None:
                names = [r[0] for r in connection.execute("SELECT name FROM mixtures ORDER BY id")]
                raise StoreError(f"{self.path}: no mixture '{mixture}' (mixtures: {', '.join(names) or 'none'})")
            self.start, self.length = row
        finally:
            connection.close()
        if verify:
            for dataset in self.datasets.values():
                self._verify(dataset)
        self._pid: int | None = None
        self._connection: sqlite3.Connection | None = None
        self._rows: dict[int, RowSource] = {}

    def _verify(self, dataset: StoredDataset) -> None:
        changes = changed_files(dataset.files)
        if changes:
            raise StaleStoreError(
                f"{self.path}: dataset '{dataset.name}' changed since the build: {'; '.join(changes)}; rebuild the store"
            )
        plugin = converters.get(dataset.converter)
        if plugin.version != dataset.converter_version:
            raise StaleStoreError(
                f"{self.path}: dataset '{dataset.name}': converter '{dataset.converter}' is version "
                f"{plugin.version}, the store was built with version {dataset.converter_version}; rebuild the store"
            )

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:
        # Connections and memory maps belong to one process; workers reopen their own.
        state = self.__dict__.copy()
        state.update(_pid=None, _connection=None, _rows={})
        return state

    def _db(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._connection = connect_readonly(self.path)
            self._rows = {}
            self._pid = os.getpid()
        return self._connection  # type: ignore[return-value]

    def position(self, index: int) -> int:
        """``index`` as a position in ``range(len(self))``; negative counts from the end."""
        if not -self.length <= index < self.length:
            raise IndexError(f"position {index} out of range for mixture '{self.mixture}' of {self.length} entries")
        return index % self.length

    def get(self, index: int) -> dict[str, Any]:
        """The sample at position ``index`` of the mixture."""
        position = self.position(index)
        dataset_id, row, cut = self._db().execute(_FETCH_ONE, (self.start + position,)).fetchone()
        return self._sample(dataset_id, row, cut)

    def get_many(self, indices: list[int]) -> list[dict[str, Any]]:
        """Samples at many positions with one SQL query, in the order asked."""
        rowids = [self.start + self.position(i) for i in indices]
        found = {r[0]: r[1:] for r in self._db().execute(_FETCH_MANY, (json.dumps(rowids),))}
        return [self._sample(*found[rowid]) for rowid in rowids]

    def entry(self, index: int) -> tuple[str, int, int | None]:
        """The ``(dataset, row, cut)`` triple at a position, without fetching the row."""
        dataset_id, row, cut = self._db().execute(_FETCH_ONE, (self.start + self.position(index),)).fetchone()
        return self.datasets[dataset_id].name, row, cut

    def _sample(self, dataset_id: int, row: int, cut: int | None) -> dict[str, Any]:
        dataset = self.datasets[dataset_id]
        raw = self._row_source(dataset).row(row)
        plugin = converters.get(dataset.converter)
        sample = convert_row(plugin.func, raw, dataset.name, row, plugin.name)
        return {"_dataset_name": dataset.name, **truncate(sample, cut)}

    def _row_source(self, dataset: StoredDataset) -> RowSource:
        self._db()
        source = self._rows.get(dataset.id)
        if source is None:
            source = self._rows[dataset.id] = open_rows(dataset)
        return source


def open_rows(dataset: StoredDataset) -> RowSource:
    """Map the recorded Arrow files; if they are gone, load the source again and check its length."""
    if dataset.arrow_files and arrow_files_intact(dataset.arrow_files):
        return ArrowRows([f["path"] for f in dataset.arrow_files])
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


def _read_datasets(connection: sqlite3.Connection) -> dict[int, StoredDataset]:
    query = (
        "SELECT id, name, path, source, split, converter, converter_version, info, rows, files, arrow_files "
        "FROM datasets ORDER BY position"
    )
    datasets = {}
    for row in connection.execute(query):
        info, files, arrow_files = (json.loads(v) if v is not None else None for v in row[7:8] + row[9:11])
        datasets[row[0]] = StoredDataset(
            id=row[0], name=row[1], path=row[2], source=row[3], split=row[4], converter=row[5],
            converter_version=row[6], info=info, rows=row[8], files=files, arrow_files=arrow_files,
        )
    return datasets

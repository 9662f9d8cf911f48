"""Read a mixture's entries from a store and turn them into samples, without torch.

``StoreReader`` is what ``DataEngine`` and ``dataidx show`` share: open checks the store's
schema, that the sources did not change and that each converter is the recorded version;
fetching a position is one rowid lookup, a row read from the memory-mapped Arrow data, and the
converter run on that row. Connections and mapped files are opened lazily per process, so a
reader can be pickled into DataLoader workers (fork or spawn).
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from .converters import convert_row, converters
from .errors import StaleStoreError, StoreError
from .expansion import truncate
from .rows import ArrowRows, DatasetRows, RowSource, arrow_files_intact
from .storefile import connect_readonly
from .verify import dataset_problems

MMAP_BYTES = 1 << 40
CACHE_KIB = 256
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
    loader_version: str
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
            self.datasets = read_datasets(connection)
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
        self._local: _ProcessState | None = None

    def _verify(self, dataset: StoredDataset) -> None:
        problems = dataset_problems(dataset)
        if problems:
            raise StaleStoreError(
                f"{self.path}: dataset '{dataset.name}' changed since the build: {'; '.join(problems)}; "
                "rebuild the store (or open it with verify=False / --no-verify to read it anyway)"
            )

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:
        # Connections and memory maps belong to one process; workers reopen their own.
        return {**self.__dict__, "_local": None}

    def _process(self) -> _ProcessState:
        local = self._local
        if local is None or local.pid != os.getpid():
            local = self._local = _ProcessState(self.path)
        return local

    def position(self, index: int) -> int:
        """``index`` as a position in ``range(len(self))``; negative counts from the end."""
        if not -self.length <= index < self.length:
            raise IndexError(f"position {index} out of range for mixture '{self.mixture}' of {self.length} entries")
        return index % self.length

    def get(self, index: int) -> dict[str, Any]:
        """The sample at position ``index`` of the mixture."""
        local = self._process()
        dataset_id, row, cut = self._lookup(local, _FETCH_ONE, self.start + self.position(index))[0]
        return local.fetcher(self.datasets[dataset_id]).sample(row, cut)

    def get_many(self, indices: list[int]) -> list[dict[str, Any]]:
        """Samples at many positions with one SQL query, in the order asked."""
        local = self._process()
        rowids = [self.start + self.position(i) for i in indices]
        found = {r[0]: r[1:] for r in self._lookup(local, _FETCH_MANY, json.dumps(rowids))}
        if len(found) != len(set(rowids)):
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; the store is damaged")
        samples = []
        # A batch only allocates acyclic objects: a collection in the middle of it is pure cost.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for rowid in rowids:
                dataset_id, row, cut = found[rowid]
                samples.append(local.fetcher(self.datasets[dataset_id]).sample(row, cut))
        finally:
            if collecting:
                gc.enable()
        return samples

    def entry(self, index: int) -> tuple[str, int, int | None]:
        """The ``(dataset, row, cut)`` triple at a position, without fetching the row."""
        dataset_id, row, cut = self._lookup(self._process(), _FETCH_ONE, self.start + self.position(index))[0]
        return self.datasets[dataset_id].name, row, cut

    def _lookup(self, local: _ProcessState, sql: str, parameter: Any) -> list[tuple]:
        try:
            found = local.connection.execute(sql, (parameter,)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read store: {exc}") from None
        if not found and sql is _FETCH_ONE:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' has no entry at rowid {parameter}; the store is damaged")
        return found


class _ProcessState:
    """What one process opens for a reader: its connection and, lazily, one fetcher per dataset."""

    def __init__(self, path: str) -> None:
        self.pid = os.getpid()
        self.connection = connect_readonly(path)
        # Pages come through a shared memory map; a small private cache keeps workers lean.
        self.connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        self.connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        self.fetchers: dict[int, _Fetcher] = {}

    def fetcher(self, dataset: StoredDataset) -> _Fetcher:
        found = self.fetchers.get(dataset.id)
        if found is None:
            found = self.fetchers[dataset.id] = _Fetcher(dataset)
        return found


class _Fetcher:
    """Rows of one dataset turned into samples: read the raw row, convert it, cut it."""

    def __init__(self, dataset: StoredDataset) -> None:
        self.name = dataset.name
        self.rows = open_rows(dataset)
        plugin = converters.get(dataset.converter)
        self.convert, self.converter = plugin.func, plugin.name

    def sample(self, row: int, cut: int | None) -> dict[str, Any]:
        sample = convert_row(self.convert, self.rows.row(row), self.name, row, self.converter)
        return {"_dataset_name": self.name, **truncate(sample, cut)}


def open_rows(dataset: StoredDataset) -> RowSource:
    """Map the recorded Arrow files; if they are gone, load the source again and check its length."""
    if dataset.arrow_files and arrow_files_intact(dataset.arrow_files):
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


def read_datasets(connection: sqlite3.Connection) -> dict[int, StoredDataset]:
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

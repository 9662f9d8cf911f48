"""Read a mixture's entries from a store and turn them into samples, without torch.

``StoreReader`` is what ``DataEngine`` and ``dataidx show`` share: open checks the store's
schema, that the sources did not change and that each converter is the recorded version;
fetching a position is one rowid lookup, a row read from the memory-mapped Arrow data, and the
converter run on that row. Connections and mapped files are opened lazily per process, so a
reader can be pickled into DataLoader workers (fork or spawn).
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .converters import convert_row, converters
from .errors import StaleStoreError, StoreError
from .stored import StoredDataset, open_rows, read_datasets, read_mixture
from .storefile import ReadConnection, connect_readonly, on_postgres, read_stamp
from .verify import dataset_problems

MMAP_BYTES = 1 << 40
CACHE_KIB = 256
# A position inside a run is an entry id by arithmetic; any other is a mixture_entries rowid.
_ENTRY_ONE = "SELECT id, dataset_id, row, cut FROM base_entries WHERE id = ?"
_ENTRY_MANY = "SELECT id, dataset_id, row, cut FROM base_entries WHERE id IN (SELECT value FROM json_each(?))"
_POSITION_ONE = (
    "SELECT me.id, b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id = ?"
)
_POSITION_MANY = (
    "SELECT me.id, b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id IN (SELECT value FROM json_each(?))"
)


_FROZEN_IN: int | None = None


def _freeze_inherited_objects() -> None:
    """In a forked worker, move every object inherited from the parent out of the collector's
    reach, once. A collection writes to each object's header, so it would copy every parent page
    it visits into the worker (pytorch#13246): measured 21 MiB of private memory per 60k random
    fetches without this, 3.5 MiB with it. The parent's objects stay alive in the parent anyway."""
    global _FROZEN_IN
    if _FROZEN_IN != os.getpid():
        _FROZEN_IN = os.getpid()
        gc.freeze()


@contextmanager
def paused_gc() -> Iterator[None]:
    """A batch allocates only acyclic objects: a collection in the middle of it is pure cost."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class EntryReader:
    """Base entries of a store by id -> samples; what every reader and the render pass share.

    Opening checks the store's schema, that the sources did not change and that each converter
    is the recorded version. Connections and mapped files are per process (see ``_process``).
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        self.path = os.fspath(path)
        connection = connect_readonly(self.path)
        try:
            self.stamp = read_stamp(connection)
            self.datasets = read_datasets(connection)
            self._open(connection)
            if verify:
                for dataset in self.datasets.values():
                    self._verify(dataset)
        except BaseException:
            connection.close()
            raise
        # This process keeps reading the file it just described, even if it is replaced later;
        # other processes (DataLoader workers) reconnect and check it is still the same store.
        self._local: _ProcessState | None = _ProcessState(self.path, self.stamp, connection)

    def _open(self, connection: ReadConnection) -> None:
        """Read what a subclass needs while the store is being opened."""

    def _verify(self, dataset: StoredDataset) -> None:
        problems = dataset_problems(dataset)
        if problems:
            raise StaleStoreError(
                f"{self.path}: dataset '{dataset.name}' changed since the build: {'; '.join(problems)}; "
                "rebuild the store (or open it with verify=False / --no-verify to read it anyway)"
            )

    def __getstate__(self) -> dict[str, Any]:
        # Connections and memory maps belong to one process; workers reopen their own.
        return {**self.__dict__, "_local": None}

    def _process(self) -> _ProcessState:
        local = self._local
        if local is None or local.pid != os.getpid():
            if local is not None:  # forked from the process that opened the store
                _freeze_inherited_objects()
            local = self._local = _ProcessState(self.path, self.stamp)
        return local

    def _query(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            return self._process().rows(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read store: {exc}") from None

    def entry_triples(self, first: int, last: int) -> list[tuple[int, int, int, int | None]]:
        """``(entry id, dataset_id, row, cut)`` of base entries ``first..last``, in id order."""
        return self._query("SELECT id, dataset_id, row, cut FROM base_entries WHERE id BETWEEN ? AND ? ORDER BY id",
                           (first, last))

    def entries_by_id(self, entry_ids: list[int]) -> list[tuple[int, int, int | None]]:
        """``(dataset_id, row, cut)`` per base entry id, in the order asked: one query."""
        sql, parameter = (_ENTRY_ONE, entry_ids[0]) if len(entry_ids) == 1 else (_ENTRY_MANY, json.dumps(entry_ids))
        found = {r[0]: r[1:] for r in self._query(sql, (parameter,))}
        try:
            return [found[i] for i in entry_ids]
        except KeyError:
            raise StoreError(f"{self.path}: base entries are missing; the store is damaged") from None

    def sample(self, dataset_id: int, row: int, cut: int | None) -> dict[str, Any]:
        """The sample of one entry: a row read from the mapped Arrow data, converted and cut."""
        return self._process().fetcher(self.datasets[dataset_id]).sample(row, cut)


class StoreReader(EntryReader):
    """Positions of one mixture of a store -> ``{"_dataset_name": ..., **sample}`` dicts.

    Example::

        reader = StoreReader("demo.db")
        reader.get(0), reader.get_many([3, 1, 2])
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, verify: bool = True) -> None:
        self.mixture = mixture
        super().__init__(path, verify=verify)

    def _open(self, connection: ReadConnection) -> None:
        found = read_mixture(connection, self.mixture, self.path)
        self.mixture_id, self.start, self.length = found.id, found.start, found.entries
        # A handful per dataset: kept in memory, so a position in a run costs no mixture lookup.
        self._runs = connection.execute(
            "SELECT start, first_entry, length FROM mixture_runs WHERE mixture_id = ? ORDER BY start",
            (self.mixture_id,),
        ).fetchall()
        self._run_starts = [run[0] for run in self._runs]

    def __len__(self) -> int:
        return self.length

    def position(self, index: int) -> int:
        """``index`` as a position in ``range(len(self))``; negative counts from the end."""
        if not -self.length <= index < self.length:
            raise IndexError(f"position {index} out of range for mixture '{self.mixture}' of {self.length} entries")
        return index % self.length

    def _key(self, index: int) -> tuple[bool, int]:
        """``(True, entry id)`` for a position inside a run, else ``(False, mixture_entries rowid)``."""
        position = self.start + self.position(index)
        run = bisect.bisect_right(self._run_starts, position) - 1
        if run >= 0:
            start, first_entry, length = self._runs[run]
            if position < start + length:
                return True, first_entry + position - start
        return False, position

    def triples(self, indices: list[int]) -> list[tuple[int, int, int | None]]:
        """``(dataset_id, row, cut)`` per index: at most one query for run positions, one for others."""
        keys = [self._key(i) for i in indices]
        found: dict[tuple[bool, int], tuple] = {}
        for in_run, one, many in ((True, _ENTRY_ONE, _ENTRY_MANY), (False, _POSITION_ONE, _POSITION_MANY)):
            wanted = [value for kind, value in keys if kind is in_run]
            if not wanted:
                continue
            sql, parameter = (one, wanted[0]) if len(wanted) == 1 else (many, json.dumps(wanted))
            found.update(((in_run, r[0]), r[1:]) for r in self._query(sql, (parameter,)))
        try:
            return [found[key] for key in keys]
        except KeyError:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; the store is damaged") from None

    def get(self, index: int) -> dict[str, Any]:
        """The sample at position ``index`` of the mixture: one rowid lookup, one row read."""
        in_run, key = self._key(index)
        local = self._process()
        try:
            found = local.rows(_ENTRY_ONE if in_run else _POSITION_ONE, (key,))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read store: {exc}") from None
        if not found:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; the store is damaged")
        _, dataset_id, row, cut = found[0]
        return local.fetcher(self.datasets[dataset_id]).sample(row, cut)

    def get_many(self, indices: list[int]) -> list[dict[str, Any]]:
        """Samples at many positions with at most two SQL queries, in the order asked."""
        triples = self.triples(indices)
        local = self._process()
        with paused_gc():
            return [local.fetcher(self.datasets[dataset_id]).sample(row, cut) for dataset_id, row, cut in triples]

    def entry(self, index: int) -> tuple[str, int, int | None]:
        """The ``(dataset, row, cut)`` triple at a position, without fetching the row."""
        (dataset_id, row, cut), = self.triples([index])
        return self.datasets[dataset_id].name, row, cut


class _ProcessState:
    """What one process opens for a reader: its connection and, lazily, one fetcher per dataset."""

    def __init__(self, path: str, stamp: int, connection: ReadConnection | None = None) -> None:
        self.pid, self.path, self.stamp = os.getpid(), path, stamp
        self.connection = connection or connect_readonly(path)
        # A file stays readable after it is replaced; a PostgreSQL schema is swapped in place, so
        # there every query also reads the stamp and a replaced store is noticed at once.
        self.postgres = on_postgres(self.connection)
        if read_stamp(self.connection) != stamp:
            self.connection.close()
            raise self.replaced()
        if not self.postgres:
            # Pages come through a shared memory map; a small private cache keeps workers lean.
            self.connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            self.connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        self.fetchers: dict[int, _Fetcher] = {}

    def replaced(self) -> StaleStoreError:
        return StaleStoreError(
            f"{self.path}: the store was replaced (rebuilt, or changed by mix, remove-mixture or migrate) "
            "after this reader opened it; open it again"
        )

    def rows(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """All rows of a read; on PostgreSQL checked in the same statement to be of this store."""
        if not self.postgres:
            return self.connection.execute(sql, parameters).fetchall()
        assert sql.startswith("SELECT "), sql
        found = self.connection.execute(
            sql.replace("SELECT ", "SELECT (SELECT stamp FROM dataidx_store), ", 1), parameters).fetchall()
        # No row carries no stamp: then ask for it, so an empty answer is never another store's.
        if (found[0][0] if found else read_stamp(self.connection)) != self.stamp:
            raise self.replaced()
        return [row[1:] for row in found]

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
        sample = {"_dataset_name": self.name,
                  **convert_row(self.convert, self.rows.row(row), self.name, row, self.converter)}
        if cut is not None:  # truncate() on the copy made above: one dict copy per sample, not two
            sample["messages"] = sample["messages"][:cut]
        return sample

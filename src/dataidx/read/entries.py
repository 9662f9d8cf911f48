"""A store's entries without their rows: base entries by id, and one epoch of a mixture's
positions -> entries. What names entries (``dataidx steps``, ``skip``, ``order``) reads, loading
neither the converters nor the row readers (pyarrow); :mod:`.reader` adds samples on top.
Connections are opened lazily per process (:mod:`.process`), so a reader can be pickled into
DataLoader workers (fork or spawn).
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import StoreError
from ..store import (
    Closable,
    Datasets,
    Mixtures,
    Orders,
    ReadIdentity,
    StoreHandle,
    open_store,
)
from .holding import positions_holding
from .process import ProcessState, freeze_inherited_objects

# A position inside a run is an entry id by arithmetic; any other is a mixture_entries rowid. The
# fetches are the nouns' templates, taken once here: a fetch looks up no attribute.
_ENTRY_ONE, _ENTRY_MANY, _ENTRY_RANGE = Datasets.FETCH_ONE, Datasets.FETCH_MANY, Datasets.FETCH_BETWEEN
_POSITION_ONE, _POSITION_MANY, _EXPLICIT_ENTRIES = (Mixtures.FETCH_POSITION, Mixtures.FETCH_POSITIONS,
                                                    Mixtures.FETCH_EXPLICIT)


class StoreEntries(Closable):
    """Base entries of a store by id, without their rows: what every reader shares.

    Opening checks the store's schema. Store handles are per process (see ``_process``), so a
    reader can be pickled into DataLoader workers; ``close()`` (or a ``with`` block) gives back
    this process's.
    """

    def __init__(self, path: str | os.PathLike[str], *, reads: dict[str, str] | None = None) -> None:
        self.path = os.fspath(path)
        self.closed = False
        handle = open_store(self.path)
        try:
            self.stamp = handle.stamp()
            self.datasets = Datasets(handle).by_id()
            self._open(handle)
            # What this reader depends on: a later write that leaves it alone never stops it.
            self.identity = ReadIdentity.of(handle, **{**self._reads(), **(reads or {})})
            self._check()
        except BaseException:
            handle.close()
            raise
        # This process keeps reading the file it just described, even if it is replaced later;
        # other processes (DataLoader workers) reconnect and check it is still the same store.
        self._local: ProcessState | None = ProcessState(self.path, self.stamp, handle, self.identity)

    def _open(self, handle: StoreHandle) -> None:
        """Read what a subclass needs while the store is being opened."""

    def _reads(self) -> dict[str, str]:
        """The mixture, spec or plan a subclass reads, besides the base index (see :mod:`dataidx.store.identity`)."""
        return {}

    def _check(self) -> None:
        """Check, while the store is being opened, what a subclass must before it reads."""

    def __getstate__(self) -> dict[str, Any]:
        # Connections and memory maps belong to one process; workers reopen their own.
        return {**self.__dict__, "_local": None}

    def _process(self) -> ProcessState:
        local = self._local
        if local is None or local.pid != os.getpid():
            if self.closed:
                raise StoreError(f"{self.path}: read after the reader was closed")
            if local is not None:  # forked from the process that opened the store
                freeze_inherited_objects()
            local = self._local = ProcessState(self.path, self.stamp, identity=self.identity)
        return local

    @property
    def handle(self) -> StoreHandle:
        """This process's handle on the store: what a reader built on this one reads through."""
        return self._process().handle

    def close(self) -> None:
        """Give back this process's store handle (a DataLoader worker's is its own, and ends
        with it); later reads are refused. Closing twice is harmless."""
        self.closed = True
        local, self._local = self._local, None
        if local is not None and local.pid == os.getpid():
            local.close()

    def fetch(self, template: str, *parameters: Any) -> list[tuple[Any, ...]]:
        """Rows of a read in this process, its SQL a template whose select list starts with
        ``{stamped}`` (see :mod:`dataidx.store.dialect`)."""
        return self._process().handle.fetch(template, *parameters)

    def entries_between(self, first: int, last: int) -> list[tuple[int, int, int, int | None]]:
        """``(entry id, dataset_id, row, cut)`` of base entries ``first..last``, in id order."""
        return self.fetch(_ENTRY_RANGE, first, last)

    def entries_by_id(self, entry_ids: list[int]) -> list[tuple[int, int, int | None]]:
        """``(dataset_id, row, cut)`` per base entry id, in the order asked: one query."""
        sql, parameter = (_ENTRY_ONE, entry_ids[0]) if len(entry_ids) == 1 else (_ENTRY_MANY, json.dumps(entry_ids))
        found = {r[0]: r[1:] for r in self.fetch(sql, parameter)}
        try:
            return [found[i] for i in entry_ids]
        except KeyError:
            raise StoreError(f"{self.path}: base entries are missing; the store is damaged") from None


class MixtureEntries(StoreEntries):
    """Positions of one epoch of a mixture of a store -> base entries, without their rows: what
    names a run's entries (``dataidx steps``, ``skip``, ``order``) reads.

    Example::

        entries = MixtureEntries("demo.db")
        entries.entry(0), entries.entries_at([3, 1, 2])
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, epoch: int = 0,
                 reads: dict[str, str] | None = None) -> None:
        self.mixture, self.epoch = mixture, epoch
        StoreEntries.__init__(self, path, reads=reads)

    def _reads(self) -> dict[str, str]:
        return {"mixture": self.mixture}

    def _open(self, handle: StoreHandle) -> None:
        found = Mixtures(handle).get(self.mixture, self.epoch)
        self.mixture_id, self.epoch = found.id, found.epoch
        self.epochs = found.stretches
        self.start, self.length = found.start, found.positions
        # A handful per dataset: kept in memory, so a position in a run costs no mixture lookup.
        self._runs = Mixtures(handle).runs(self.mixture_id)
        self._run_starts = [run[0] for run in self._runs]

    def __len__(self) -> int:
        return self.length

    def set_epoch(self, epoch: int) -> None:
        """Serve epoch ``epoch`` of the mixture from now on (each is stored, with its own draw): a
        trainer's per-epoch hook, so past the stored epochs it serves ``epoch % epochs``."""
        self.epoch = Mixtures.served_epoch(epoch, len(self.epochs), self.mixture, self.path)
        self.start, self.length = self.epochs[self.epoch]

    @property
    def serving(self) -> str:
        """What this reader serves, for messages: ``mixture 'x', epoch 1 of 3``."""
        return Mixtures.serving(self.mixture, self.epoch, len(self.epochs))

    def position(self, index: int) -> int:
        """``index`` as a position in ``range(len(self))``; negative counts from the end."""
        if not -self.length <= index < self.length:
            raise IndexError(f"position {index} out of range for {self.serving} of {self.length} entries")
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

    def entry_ids(self, indices: np.ndarray) -> np.ndarray:
        """Base entry id at each of ``indices`` (in ``range(len(self))``), for a pass over many:
        run positions by arithmetic on arrays, the others in one query."""
        positions = self.start + np.asarray(indices, dtype=np.int64)
        runs = np.asarray(self._runs, dtype=np.int64).reshape(-1, 3)
        run = runs[np.maximum(np.searchsorted(runs[:, 0], positions, side="right") - 1, 0)] if len(runs) else None
        in_run = (np.zeros(len(positions), dtype=bool) if run is None
                  else (positions >= run[:, 0]) & (positions < run[:, 0] + run[:, 2]))
        found = np.empty(len(positions), dtype=np.int64)
        if run is not None:
            found[in_run] = run[in_run, 1] + positions[in_run] - run[in_run, 0]
        explicit = np.unique(positions[~in_run])
        if explicit.size:
            pairs = np.asarray(self.fetch(_EXPLICIT_ENTRIES, json.dumps(explicit.tolist())), dtype=np.int64)
            pairs = pairs.reshape(-1, 2)[np.argsort(pairs.reshape(-1, 2)[:, 0])]
            if not np.array_equal(pairs[:, 0], explicit):
                raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; the store is damaged")
            found[~in_run] = pairs[np.searchsorted(pairs[:, 0], positions[~in_run]), 1]
        return found

    def skipped_items(self, lists: Sequence[str] | None = None) -> np.ndarray:
        """The positions of the epoch served that the mixture's skip lists (or lists ``lists``)
        leave out of an order."""
        return positions_holding(self.fetch, self._runs, self.start, self.start + self.length,
                                 Orders(self.handle).skipped(self.mixture, lists))

    def entry_at(self, index: int) -> int:
        """The base entry id at one index (:meth:`entries_at` of one)."""
        in_run, value = self._key(index)
        return value if in_run else self.entries_at([index])[0]

    def entries_at(self, indices: list[int]) -> list[int]:
        """The base entry id at each index, in order: by arithmetic inside a run, the others in one
        query (a fetch's path; :meth:`entry_ids` is a pass's, over arrays)."""
        keys = [self._key(i) for i in indices]
        explicit = [value for in_run, value in keys if not in_run]
        if not explicit:
            return [value for _, value in keys]
        found = dict(self.fetch(_EXPLICIT_ENTRIES, json.dumps(explicit)))
        try:
            return [value if in_run else found[value] for in_run, value in keys]
        except KeyError:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; "
                             "the store is damaged") from None

    def triple(self, index: int, handle: StoreHandle | None = None) -> tuple[int, int, int | None]:
        """``(dataset_id, row, cut)`` of one index: one rowid lookup (through ``handle``, this
        process's, when the caller has it at hand: a fetch's path counts every call)."""
        in_run, key = self._key(index)
        found = (handle or self._process().handle).fetch(_ENTRY_ONE if in_run else _POSITION_ONE, key)
        if not found:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; the store is damaged")
        return found[0][1:]

    def triples(self, indices: list[int]) -> list[tuple[int, int, int | None]]:
        """``(dataset_id, row, cut)`` per index: at most one query for run positions, one for others."""
        keys = [self._key(i) for i in indices]
        found: dict[tuple[bool, int], tuple] = {}
        for in_run, one, many in ((True, _ENTRY_ONE, _ENTRY_MANY), (False, _POSITION_ONE, _POSITION_MANY)):
            wanted = [value for kind, value in keys if kind is in_run]
            if not wanted:
                continue
            sql, parameter = (one, wanted[0]) if len(wanted) == 1 else (many, json.dumps(wanted))
            found.update(((in_run, r[0]), r[1:]) for r in self.fetch(sql, parameter))
        try:
            return [found[key] for key in keys]
        except KeyError:
            raise StoreError(f"{self.path}: mixture '{self.mixture}' is missing entries; "
                             "the store is damaged") from None

    def entry(self, index: int) -> tuple[str, int, int | None]:
        """The ``(dataset, row, cut)`` triple at a position, without fetching the row."""
        (dataset_id, row, cut), = self.triples([index])
        return self.datasets[dataset_id].name, row, cut

"""What one process holds for a reader: its own store handle, opened rows, and a collector
kept from copying what a forked worker inherited.

Readers are pickled into DataLoader workers (spawn) or inherited by them (fork); either way a
worker opens its own handle on first use and checks it is still the store the reader
described, so a store replaced in the meantime is refused, never misread.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Sequence
from typing import cast

from ..convert import Sample, SFTSample, collecting_drops, convert_row, converters
from ..errors import StaleStoreError, StoreError
from ..store import ReadIdentity, StoredDataset, StoreHandle, identity_of, open_store
from .rows import open_rows

_FROZEN_IN: int | None = None
#: ``(store, dataset)`` pairs this process has warned about (see :class:`Fetcher`).
_WARNED: set[tuple[str, str]] = set()
logger = logging.getLogger(__name__)


def freeze_inherited_objects() -> None:
    """In a forked worker, move every object inherited from the parent out of the collector's
    reach, once. A collection writes to each object's header, so it would copy every parent page
    it visits into the worker (pytorch#13246): measured 21 MiB of private memory per 60k random
    fetches without this, 3.5 MiB with it. The parent's objects stay alive in the parent anyway."""
    global _FROZEN_IN
    if _FROZEN_IN != os.getpid():
        _FROZEN_IN = os.getpid()
        gc.freeze()


class ProcessState:
    """One process's handle on a store and, lazily, one fetcher per dataset.

    A store written since the reader opened it (a new stamp) is read on when ``identity``, what
    the reader reads, is unchanged: another mixture, spec or plan added or removed stops no one.
    """

    def __init__(self, path: str, stamp: int, handle: StoreHandle | None = None,
                 identity: ReadIdentity | None = None) -> None:
        self.pid, self.path, self.identity = os.getpid(), path, identity
        self.handle = handle or open_store(path)
        try:
            if self.handle.stamp() != stamp:
                self.check_unchanged()
            self.handle.on_new_stamp(self.check_unchanged)  # a schema swapped under a server connection
            self.handle.tune_for_fetches()
        except BaseException:
            self.handle.close()
            raise
        self.fetchers: dict[int, Fetcher] = {}

    def check_unchanged(self) -> None:
        """A StaleStoreError, naming what changed, unless what this reader reads is as it was."""
        if self.identity is None:
            raise StaleStoreError.replaced(self.path)
        changed = self.identity.changed(identity_of(self.handle, **self.identity.names()))
        if changed:
            raise StaleStoreError(f"{self.path}: {changed} after this reader opened it; open it again")

    def close(self) -> None:
        self.handle.close()

    def release_rows(self) -> None:
        """Let go of the source pages read so far (see ``ArrowRows.release``)."""
        for fetcher in self.fetchers.values():
            fetcher.rows.release()

    def fetcher(self, dataset: StoredDataset) -> Fetcher:
        found = self.fetchers.get(dataset.id)
        if found is None:
            found = self.fetchers[dataset.id] = Fetcher(dataset, self.path)
        return found


class Fetcher:
    """Rows of one dataset turned into samples: read the raw row, convert it, cut it.

    Messages a converter leaves out (an unknown role, a tool call that is not JSON) were counted
    by the build (``dataidx info``), so fetching those rows again says nothing; a drop the build
    did not record (the converter changed since) is logged once per dataset and process.
    """

    def __init__(self, dataset: StoredDataset, store: str) -> None:
        self.name = dataset.name
        self.rows = open_rows(dataset)
        plugin = converters.get(dataset.converter)
        self.convert, self.converter = plugin.func, plugin.name
        #: converts a cut entry's messages only (the build converted whole rows); None: whole, then cut
        self.prefix = plugin.prefix
        self.recorded_drops = dataset.drops
        self.store = store
        self.count = dataset.rows

    def sample(self, row: int, cut: int | None) -> Sample:
        self._check(row, cut)
        if cut is not None and self.prefix is not None:
            return self._converted(row, cut)
        sample = self._converted(row)
        if cut is not None:  # truncate() on the copy made by _converted: one dict copy per sample, not two
            conversation = cast(SFTSample, sample)  # only a conversation's entries have cuts
            conversation["messages"] = conversation["messages"][:cut]
        return sample

    def whole(self, row: int, cuts: Sequence[int | None]) -> Sample:
        """The converted row, not cut, for entries of it with ``cuts``, each checked as
        :meth:`sample` checks it: ``truncate(whole, cut)`` is then what ``sample(row, cut)`` is."""
        for cut in cuts:
            self._check(row, cut)
        return self._converted(row)

    def _check(self, row: int, cut: int | None) -> None:
        # A crafted store's entry could name row -1 (the last row, to Python) or cut -3 (all but
        # three messages): what the build never writes is refused, not served as something else.
        if not 0 <= row < self.count or (cut is not None and cut < 1):
            raise StoreError(f"{self.store}: dataset '{self.name}' has rows 0-{self.count - 1}, but an entry names "
                             f"row {row}" + ("" if cut is None or cut >= 1 else f" cut {cut}")
                             + "; the store is damaged or was altered: rebuild it")

    def _converted(self, row: int, cut: int | None = None) -> Sample:
        prefix = self.prefix if cut is not None else None
        with collecting_drops() as dropped:
            if prefix is None:
                converted = convert_row(self.convert, self.rows.row(row), self.name, row, self.converter)
            else:
                converted = convert_row(prefix, self.rows.row(row), self.name, row, self.converter, cut)
        if dropped:
            self._dropped(row, dropped[0])
        return cast(Sample, {"_dataset_name": self.name, **converted})

    def _dropped(self, row: int, reason: str) -> None:
        key = (self.store, self.name)
        if self.recorded_drops or key in _WARNED:
            return
        _WARNED.add(key)
        logger.warning("dataset '%s' row %d: the converter left part of the row out (%s), which the build did not "
                       "record: the converter changed since the build (dataidx build again counts such rows); "
                       "not repeated for this dataset", self.name, row, reason)

"""What one process holds for a reader: its own store handle, the rows it opened (see
:mod:`.fetcher`), and a collector kept from copying what a forked worker inherited.

Readers are pickled into DataLoader workers (spawn) or inherited by them (fork); either way a
worker opens its own handle on first use and checks it is still the store the reader
described, so a store replaced in the meantime is refused, never misread.
"""

from __future__ import annotations

import gc
import os
from typing import Any

from ..errors import StaleStoreError
from ..store import ReadIdentity, StoreHandle, open_store

_FROZEN_IN: int | None = None


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
        #: dataset id -> its rows and converter (:mod:`.fetcher`), opened on a first fetch; typed
        #: loosely so that this module, what every read opens, loads no converter or row reader
        self.fetchers: dict[int, Any] = {}

    def check_unchanged(self) -> None:
        """A StaleStoreError, naming what changed, unless what this reader reads is as it was."""
        if self.identity is None:
            raise StaleStoreError.replaced(self.path)
        changed = self.identity.changed(ReadIdentity.of(self.handle, **self.identity.names()))
        if changed:
            raise StaleStoreError(f"{self.path}: {changed} after this reader opened it; open it again")

    def close(self) -> None:
        self.handle.close()

    def release_rows(self) -> None:
        """Let go of the source pages read so far (see ``ArrowRows.release``)."""
        for fetcher in self.fetchers.values():
            fetcher.rows.release()

"""One dataset's rows turned into samples in one process: the raw row read, converted and cut.

Apart from :mod:`.process`, which every read opens: only a reader that fetches samples loads the
converters and the row readers (pyarrow); one that names entries (``dataidx steps``) does not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

from ..convert import Sample, SFTSample, collecting_drops, convert_row, converters
from ..errors import StoreError
from ..store import Datasets
from .media_check import MediaCheck
from .process import ProcessState
from .rows import open_rows

#: ``(store, dataset)`` pairs this process has warned about (see :class:`Fetcher`).
_WARNED: set[tuple[str, str]] = set()
logger = logging.getLogger(__name__)


def fetcher(local: ProcessState, dataset: Datasets.Stored, *, verify: bool = True) -> Fetcher:
    """The process's fetcher of ``dataset``, opened on its first fetch; with ``verify``, the media
    of each row it fetches are checked against the build's record."""
    found = local.fetchers.get(dataset.id)
    if found is None:
        media = MediaCheck(local.handle, dataset.id, dataset.name, local.path) if verify else None
        # a dataset without media keeps a fetch's cost at one test of None
        found = local.fetchers[dataset.id] = Fetcher(dataset, local.path, media if media and media.active else None)
    return found


class Fetcher:
    """Rows of one dataset turned into samples: read the raw row, convert it, cut it.

    Messages a converter leaves out (an unknown role, a tool call that is not JSON) were counted
    by the build (``dataidx info``), so fetching those rows again says nothing; a drop the build
    did not record (the converter changed since) is logged once per dataset and process.
    """

    def __init__(self, dataset: Datasets.Stored, store: str, media: MediaCheck | None = None) -> None:
        self.name = dataset.name
        self.media = media
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
        if self.media is not None:
            self.media.check(row, cut)
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
        if self.media is not None:
            self.media.check(row, None)
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

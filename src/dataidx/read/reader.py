"""Read a mixture's entries from a store and turn them into samples, without torch.

``StoreReader`` is what ``DataEngine`` and ``dataidx show`` share: open checks the store's
schema, that the sources did not change and that each converter is the recorded version;
fetching a position is one rowid lookup, a row read from the memory-mapped Arrow data, and the
converter run on that row. Connections and mapped files are opened lazily per process
(:mod:`.process`), so a reader can be pickled into DataLoader workers (fork or spawn). The
entries themselves, without rows, are :mod:`.entries`'.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..convert import Sample
from ..errors import StaleStoreError
from ..sources import paused_gc
from ..store import Datasets
from .entries import MixtureEntries, StoreEntries
from .fetcher import fetcher
from .verify import dataset_problems, datasets_as_found


class EntryReader(StoreEntries):
    """Base entries of a store by id -> samples; what every reader and the render pass share.

    Opening checks the store's schema, that the sources did not change and that each converter
    is the recorded version. Store handles and mapped files are per process (see ``_process``);
    ``close()`` (or a ``with`` block) gives back this process's.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True,
                 reads: dict[str, str] | None = None) -> None:
        self.verify = verify
        super().__init__(path, reads=reads)

    def _check(self) -> None:
        self.folder, self.datasets = datasets_as_found(self.datasets, self.path)  # sources beside it first
        if self.verify:
            for dataset in self.datasets.values():
                self._verify(dataset)

    def _verify(self, dataset: Datasets.Stored) -> None:
        problems = dataset_problems(dataset, folder=self.folder)
        if problems:
            raise StaleStoreError(
                f"{self.path}: dataset '{dataset.name}' changed since the build: {'; '.join(problems)}; "
                "rebuild the store (or open it with verify=False / --no-verify to read it anyway)"
            )

    def release_rows(self) -> None:
        """Let go of the source pages this process read so far: a pass over every row calls it
        now and then, so its resident memory stays a chunk's, not the sources' size."""
        self._process().release_rows()

    def sample(self, dataset_id: int, row: int, cut: int | None) -> Sample:
        """The sample of one entry: a row read from the mapped Arrow data, converted and cut."""
        return fetcher(self._process(), self.datasets[dataset_id], verify=self.verify).sample(row, cut)

    def whole(self, dataset_id: int, row: int, cuts: Sequence[int | None]) -> Sample:
        """One row converted once for all its entries ``cuts`` (checked as :meth:`sample` checks
        them): ``truncate(whole, cut)`` is each entry's sample, without reading and converting
        the row again per entry, which made a pass over a 4,000-turn row's cuts quadratic."""
        return fetcher(self._process(), self.datasets[dataset_id], verify=self.verify).whole(row, cuts)


class StoreReader(MixtureEntries, EntryReader):
    """Positions of one epoch of a mixture of a store -> ``{"_dataset_name": ..., **sample}`` dicts.

    Example::

        reader = StoreReader("demo.db")
        reader.get(0), reader.get_many([3, 1, 2])
        reader.set_epoch(1)  # a mixture stored with dataidx mix --epochs 2 or more
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, verify: bool = True,
                 epoch: int = 0, reads: dict[str, str] | None = None) -> None:
        self.mixture, self.epoch = mixture, epoch
        EntryReader.__init__(self, path, verify=verify, reads=reads)

    def get(self, index: int) -> Sample:
        """The sample at position ``index`` of the mixture: one rowid lookup, one row read."""
        local = self._process()
        dataset_id, row, cut = self.triple(index, local.handle)
        return fetcher(local, self.datasets[dataset_id], verify=self.verify).sample(row, cut)

    def get_many(self, indices: list[int]) -> list[Sample]:
        """Samples at many positions with at most two SQL queries, in the order asked."""
        triples = self.triples(indices)
        local = self._process()
        with paused_gc():
            return [fetcher(local, self.datasets[dataset_id], verify=self.verify).sample(row, cut)
                    for dataset_id, row, cut in triples]

"""The datasets and mixtures a store describes, as readers need them.

Read with the plain read-only connection: opening a store for training reads these and nothing
heavier.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError
from .connect import not_found
from .dialect import ReadConnection

#: What an entry can come to under a render spec, worst last; the first two train, the others
#: say why an entry does not. Stored in ``entry_renders.status``.
STATUSES = ("ok", "truncated", "too_long", "no_supervision", "render_error")
TRAINS = ("ok", "truncated")


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
    #: Messages the converter left out at build time (unknown roles, tool calls that are not
    #: JSON): counted there, so a reader need not report them again.
    drops: int = 0


def read_datasets(connection: ReadConnection) -> dict[int, StoredDataset]:
    """The stored datasets by id, in config order."""
    query = (
        "SELECT id, name, path, source, split, converter, converter_version, loader_version, info, rows, files, "
        "arrow_files, drops FROM datasets ORDER BY position"
    )
    datasets = {}
    for row in connection.execute(query):
        info, files, arrow_files = (json.loads(v) if v is not None else None for v in (row[8], row[10], row[11]))
        datasets[row[0]] = StoredDataset(*row[:8], info=info, rows=row[9], files=files, arrow_files=arrow_files,
                                         drops=row[12])
    return datasets


@dataclass(frozen=True)
class StoredMixture:
    """One epoch of a mixture: its positions are global rowids ``start .. start + entries - 1``.

    ``stretches`` holds every epoch's ``(start, entries)``; each is drawn with its own seed
    (``mixture_epochs``).
    """

    id: int
    name: str
    start: int
    entries: int
    epoch: int = 0
    stretches: tuple[tuple[int, int], ...] = ()

    @property
    def epochs(self) -> int:
        return len(self.stretches) or 1

    def at(self, epoch: int) -> StoredMixture:
        """Epoch ``epoch`` of the same mixture (a NotFoundError for one it does not have)."""
        start, entries = self.stretches[check_epoch(epoch, self.epochs, self.name)]
        return StoredMixture(self.id, self.name, start, entries, epoch, self.stretches)


def read_epochs(connection: ReadConnection, mixture_id: int) -> list[tuple[int, int]]:
    """``(start, entries)`` of each epoch of a mixture, in epoch order."""
    sql = connection.dialect.sql("SELECT start, entries FROM mixture_epochs WHERE mixture_id = {mark} ORDER BY epoch")
    return [tuple(row) for row in connection.execute(sql, (mixture_id,)).fetchall()]


def read_mixture(connection: ReadConnection, name: str, store: str | os.PathLike[str], epoch: int = 0) -> StoredMixture:
    """Epoch ``epoch`` of the stored mixture ``name``, or a NotFoundError listing the mixtures
    there are (also for an epoch it does not have)."""
    sql = connection.dialect.sql("SELECT id, name FROM mixtures WHERE name = {mark}")
    row = connection.execute(sql, (name,)).fetchone()
    if row is None:
        raise not_found(connection, "mixtures", "mixture", name, store)
    stretches = tuple(read_epochs(connection, row[0]))
    return StoredMixture(row[0], row[1], 0, 0, stretches=stretches).at(epoch)


def check_epoch(epoch: int, epochs: int, mixture: str) -> int:
    """``epoch`` when mixture ``mixture`` of ``epochs`` epochs has it, else a NotFoundError saying which it has."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < epochs:
        have = "epoch 0" if epochs == 1 else f"epochs 0-{epochs - 1}"
        raise NotFoundError(f"mixture '{mixture}' has {have}, not epoch {epoch!r} (dataidx mix --epochs N stores more)")
    return epoch

"""What a store keeps of the base index, behind one object: the datasets a build read (source,
converter, counts, files), their base entries (one per supervised turn, numbered from 1 in
dataset then row order), the rows it left out (``on_error: skip``), each dataset's rows counted
by turns, and the build's provenance.

Reads and writes are templates run through a handle or a writer's working copy: reading loads
no SQLAlchemy and no NumPy, so opening a store for training, ``dataidx info`` and ``dataidx
steps`` stay quick. What takes or gives NumPy arrays (a build's entries, a plan's row starts)
is in :mod:`.arrays`, imported by the method that needs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..location import PostgresStore, store_location, streams_folder
from ..sqlite.working_copy import Access, access, writable

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, kw_only=True)
class StoredDataset:
    """One stored dataset: what a reader needs to fetch its rows, and its counts."""

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
    #: its base entries are ``first_entry .. first_entry + entries - 1``
    first_entry: int = 1
    entries: int = 0
    #: rows left out under ``on_error: skip``, and the policy
    rejected: int = 0
    on_error: str = "raise"
    #: rows with no supervised turn and no preference pair (None: built before they were counted)
    empty_rows: int | None = None


_COLUMNS = ("id", "name", "position", "path", "source", "loader_version", "split", "converter", "converter_version",
            "info", "rows", "entries", "first_entry", "drops", "files", "arrow_files", "rejected", "on_error",
            "empty_rows")
_JSON_COLUMNS = ("info", "files", "arrow_files")
_DATASETS = ("SELECT id, name, path, source, split, converter, converter_version, loader_version, info, rows, files, "
             "arrow_files, drops, first_entry, entries, rejected, on_error, empty_rows FROM datasets ORDER BY position")
_BUILD_COLUMNS = ("created_at", "config_origin", "config_text", "config_sha256", "dataidx_version", "seconds")
_LAST_BUILD = f"SELECT {', '.join(_BUILD_COLUMNS)} FROM builds ORDER BY id DESC LIMIT 1"
# Two subqueries, each answered from the key's first or last entry: one query asking for both
# (or for a count beside them) reads every row, 2-4 s at 20M entries.
_ENTRY_RANGE = "SELECT (SELECT min(id) FROM base_entries), (SELECT max(id) FROM base_entries)"
# Rows by their number of entries, recounted from the base entries, and as the build stored them.
_TURNS = ('SELECT dataset_id, n, count(*) FROM (SELECT dataset_id, "row", count(*) AS n FROM base_entries '
          'GROUP BY dataset_id, "row") AS counted GROUP BY dataset_id, n',
          "SELECT dataset_id, turns, rows FROM dataset_turns")


class Datasets:
    """The base index of a store, over a store handle (reads) or a writer's connection (reads
    and writes; see :func:`~dataidx.store.sqlite.working_copy.writable`).

    Example::

        with open_store("demo.db") as handle:
            names = [dataset.name for dataset in Datasets(handle).by_id().values()]
    """

    #: What :meth:`by_id` gives for each dataset.
    Stored: TypeAlias = StoredDataset

    #: A reader's fetches (see :meth:`~dataidx.store.StoreHandle.fetch`), the hot path of every
    #: sample: ``(id, dataset_id, row, cut)`` of one base entry, of a JSON list of ids, and of
    #: ids ``first .. last`` in order; ``(id, cut)`` of the entries of a dataset's row.
    FETCH_ONE = "SELECT {stamped}id, dataset_id, row, cut FROM base_entries WHERE id = {mark}"
    FETCH_MANY = "SELECT {stamped}id, dataset_id, row, cut FROM base_entries WHERE id IN ({ids})"
    FETCH_BETWEEN = ("SELECT {stamped}id, dataset_id, row, cut FROM base_entries WHERE id BETWEEN {mark} AND {mark} "
                     "ORDER BY id")
    FETCH_ROW = "SELECT {stamped}id, cut FROM base_entries WHERE dataset_id = {mark} AND row = {mark} ORDER BY id"

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    #: Where a store's streaming sources are materialised (``<store>.streams`` beside a file).
    streams_folder = staticmethod(streams_folder)

    @staticmethod
    def folder_of(store: str | os.PathLike[str] | PostgresStore) -> str | None:
        """The folder a SQLite store's file is in, links resolved: what its sources' recorded
        places are relative to (see :mod:`dataidx.sources.fingerprints`). None for a store in
        PostgreSQL, which has no folder."""
        location = store_location(store)
        return None if isinstance(location, PostgresStore) else os.path.dirname(os.path.realpath(location))

    def by_id(self) -> dict[int, StoredDataset]:
        """The stored datasets by id, in config order."""
        datasets = {}
        for (id_, name, path, source, split, converter, converter_version, loader_version, info, rows, files,
             arrow_files, drops, first_entry, entries, rejected, on_error, empty_rows) in self.store.all(_DATASETS):
            datasets[id_] = StoredDataset(
                id=id_, name=name, path=path, source=source, split=split, converter=converter,
                converter_version=converter_version, loader_version=loader_version, info=json.loads(info or "{}"),
                rows=rows, files=json.loads(files or "[]"),
                arrow_files=None if arrow_files is None else json.loads(arrow_files), drops=drops,
                first_entry=first_entry, entries=entries, rejected=rejected, on_error=on_error, empty_rows=empty_rows)
        return datasets

    def last_build(self) -> dict[str, Any] | None:
        """The provenance of the build that made the store (config, version, time), or None."""
        found = self.store.one(_LAST_BUILD)
        return None if found is None else dict(zip(_BUILD_COLUMNS, found))

    def entry_range(self) -> tuple[int, int] | None:
        """``(first, last)`` base entry id, or None for a store without entries."""
        first, last = self.store.one(_ENTRY_RANGE) or (None, None)
        return None if first is None or last is None else (first, last)

    def absent(self, entry_ids: Iterable[int]) -> list[int]:
        """Those of base entry ids ``entry_ids`` the store does not hold, sorted."""
        wanted = set(entry_ids)
        held = {entry for entry, in self.store.all("SELECT id FROM base_entries WHERE id IN ({ids})",
                                                   json.dumps(sorted(wanted)))}
        return sorted(wanted - held)

    def row_starts(self) -> tuple[int, np.ndarray]:
        """``(first, starts)``: whether base entry ``first + i`` is the first entry of its row, for
        every base entry (:func:`.arrays.row_starts`)."""
        from .arrays import row_starts  # NumPy: the read path loads none

        return row_starts(self.store, self.entry_range(), [dataset.first_entry for dataset in self.by_id().values()])

    def entry_rows(self, first_entry: int, entries: int) -> np.ndarray:
        """The row of each base entry ``first_entry .. first_entry + entries - 1``, in id order: a
        hold-out draws rows, and takes every cut of each."""
        import numpy as np  # the read path loads none

        found = self.store.all('SELECT "row" FROM base_entries WHERE id BETWEEN {mark} AND {mark} ORDER BY id',
                               first_entry, first_entry + entries - 1)
        return np.array([row for row, in found], dtype=np.int64)

    def turns_differing(self) -> int:
        """Rows of ``dataset_turns`` that differ from a recount of the base entries (``verify``)."""
        recounted, stored = (set(self.store.all(sql)) for sql in _TURNS)
        return len(recounted ^ stored)

    def add(self, record: Mapping[str, Any]) -> None:
        """Store a dataset's record (``record`` holds every column of ``datasets``)."""
        values = [json.dumps(record[column]) if column in _JSON_COLUMNS else record[column] for column in _COLUMNS]
        writable(self.store).execute(f"INSERT INTO datasets ({', '.join(_COLUMNS)}) "
                                     f"VALUES ({', '.join(['{mark}'] * len(_COLUMNS))})", *values)

    def add_entries(self, dataset_id: int, first_id: int, rows: np.ndarray, cuts: np.ndarray) -> None:
        """Base entries ``first_id, first_id + 1, ...`` of a dataset, its ``rows`` and ``cuts`` (a cut
        below 0 is none: a row that is one entry)."""
        from .arrays import insert_base_entries  # NumPy and SQLAlchemy: the read path loads neither

        insert_base_entries(writable(self.store).connection, dataset_id, first_id, rows, cuts)

    def add_rejects(self, dataset_id: int, rejects: Iterable[tuple[int, str]]) -> None:
        """Rows of a dataset the build left out, each ``(row, reason)``."""
        writable(self.store).insert_many("INSERT INTO rejected_rows (dataset_id, row, reason) "
                                         "VALUES ({mark}, {mark}, {mark})",
                                         [(dataset_id, row, reason) for row, reason in rejects])

    def add_digests(self, rows: Iterable[tuple[int, str, str | None]]) -> None:
        """Entries another entry shares a digest with, each ``(entry id, messages, prompt)``."""
        writable(self.store).insert_many("INSERT INTO entry_digests (entry_id, messages, prompt) "
                                         "VALUES ({mark}, {mark}, {mark})", rows)

    def add_turns(self, dataset_id: int, histogram: Iterable[int]) -> None:
        """``histogram[k]``: how many of the dataset's rows have ``k`` entries."""
        writable(self.store).insert_many("INSERT INTO dataset_turns (dataset_id, turns, rows) "
                                         "VALUES ({mark}, {mark}, {mark})",
                                         [(dataset_id, turns, int(rows)) for turns, rows in enumerate(histogram)
                                          if rows])

    def add_build(self, *, created_at: str, config_origin: str, config_text: str, config_sha256: str,
                  dataidx_version: str, seconds: float) -> None:
        """Record the build that made the store."""
        writable(self.store).execute(
            f"INSERT INTO builds ({', '.join(_BUILD_COLUMNS)}) VALUES ({', '.join(['{mark}'] * len(_BUILD_COLUMNS))})",
            created_at, config_origin, config_text, config_sha256, dataidx_version, seconds)

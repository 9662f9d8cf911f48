"""Index one dataset into the store: load it, expand its rows into entries, record the rest.

Rows are read, converted and written a chunk at a time (:data:`CHUNK_ROWS` rows or
:data:`CHUNK_BYTES` of Arrow data), so a build's memory holds a chunk or two whatever the size
of the dataset, and the rows stored are the same however it is chunked. The vectorised path (a
converter's ``fast`` function over a chunk's Arrow table) runs when the chunk is valid UTF-8 and
the converter offers one; otherwise every row of the chunk goes through the converter itself,
where a failing row either stops the build (``on_error: raise``) with the dataset, row,
converter and cause, or is recorded as a reject with its reason (``skip``). Converting touches
no database: chunk *k* is written on a writer thread while chunk *k + 1* is converted, and the
source files are hashed on another thread meanwhile.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from sqlalchemy import Connection

from ..convert import (
    NO_CUT,
    EntryPrints,
    SamplePrints,
    TableCuts,
    collecting_drops,
    converters,
    expanded_row,
    table_prints,
)
from ..errors import ConversionError, SourceError
from ..plugins import Plugin
from ..sources import (
    ArrowRows,
    BadRow,
    DatasetRows,
    RenamedRows,
    RowChunk,
    RowSource,
    add_places,
    arrow_files_at,
    arrow_files_of,
    changed_while_read,
    file_stats,
    fingerprint_files,
    load,
    source_files,
    sources,
)
from ..spec import DatasetSpec
from ..store import Datasets, Media
from .chunking import CHUNK_BYTES, CHUNK_ROWS, vectorised
from .empty import refuse_empty
from .exact import ExactGroups
from .holdout import DeferredDraws
from .media import BuildMedia, Use
from .mixtures import MixtureWriter
from .unread import refuse_unread

__all__ = ["CHUNK_BYTES", "CHUNK_ROWS", "DatasetSummary", "Writes", "index_dataset"]


@dataclass(frozen=True, kw_only=True)
class DatasetSummary:
    name: str
    rows: int
    entries: int
    drops: int
    rejected: int = 0
    #: rows whose sample has no supervised turn and no preference pair
    empty: int = 0
    #: loading and expanding it, plus writing it (the two overlap with other datasets' steps)
    seconds: float = 0.0


class Writes:
    """Work handed to one writer thread in order, at most ``depth`` tasks waiting: the converter
    runs ahead of SQLite by a chunk or two, never by a whole dataset."""

    def __init__(self, executor: Executor, depth: int = 2) -> None:
        self.executor, self.depth = executor, depth
        self.pending: deque[Future[Any]] = deque()

    def submit(self, task: Callable[..., Any], *args: Any, **keywords: Any) -> Future[Any]:
        while len(self.pending) >= self.depth:
            self.pending.popleft().result()
        future = self.executor.submit(task, *args, **keywords)
        self.pending.append(future)
        return future

    def drain(self) -> None:
        """Wait for every task; the first that failed raises here, so the build's transaction
        rolls back instead of committing a dataset whose entries were never written."""
        while self.pending:
            self.pending.popleft().result()


def index_dataset(dataset: DatasetSpec, *, position: int, first_entry: int, connection: Connection, writes: Writes,
                  hashing: Executor, mixture: MixtureWriter | DeferredDraws, media: BuildMedia, exact: ExactGroups,
                  folder: str | None = None) -> tuple[dict[str, Any], Future[DatasetSummary]]:
    """Load ``dataset``, convert it chunk by chunk and hand each chunk's entries to
    ``writes``; its record and its draw into ``mixture`` follow its last chunk; its rows' media
    are read into ``media`` and their blocks written with the chunk; its entries' fingerprints go
    to ``exact``. Its files are
    recorded with their places relative to the store's ``folder`` too, so the store opens after
    a move of the folder that holds it and them.

    Returns the dataset's record (``entries`` tells the next dataset where to start) and the
    future of its summary.
    """
    started = time.perf_counter()
    before = file_stats(source_files(dataset))  # so a file that changes while it is read is noticed
    loaded = load(dataset)
    fingerprints = hashing.submit(fingerprint_files, loaded.files, folder)
    # Rows read from the Arrow files need no Dataset, whose pages would count in memory.
    arrow_files = arrow_files_at(loaded.arrow_paths) if loaded.arrow_paths else arrow_files_of(loaded.dataset)
    arrow_files = None if arrow_files is None else add_places(arrow_files, folder)
    rows: RowSource = ArrowRows(arrow_files) if arrow_files else DatasetRows(loaded.dataset)
    text_files = bool(loaded.files) and all(str(path).endswith(".txt") for path in loaded.files)
    del loaded
    if dataset.columns:
        rows = RenamedRows(rows, dataset.columns, dataset.name)
    converter = converters.get(dataset.converter or "none")
    refuse_unread(dataset, converter=converter.name, columns=rows.column_names)  # before a row is converted
    record = {
        "id": position + 1, "name": dataset.name, "position": position, "path": dataset.path, "source": dataset.source,
        "loader_version": sources.get(dataset.source).version, "split": dataset.split, "converter": converter.name,
        "converter_version": converter.version, "info": dataset.info(), "rows": len(rows), "entries": 0,
        "first_entry": first_entry, "drops": 0, "arrow_files": arrow_files, "rejected": 0, "on_error": dataset.on_error,
        "empty_rows": 0,
    }
    turns = np.zeros(1, dtype=np.int64)  # rows by their number of entries; a chunk holds whole rows
    exact.add_dataset(dataset.name, rows, converter, first_entry)
    for found, uses, prints in _converted(rows, converter, dataset, media):
        writes.submit(_write_chunk, connection, record["id"], first_entry + record["entries"], found, uses)
        exact.add(first_entry + record["entries"], found.rows, prints)  # while the writer inserts the chunk
        counted = np.bincount(_row_lengths(found.rows))
        turns = np.pad(turns, (0, max(0, len(counted) - len(turns))))
        turns[: len(counted)] += counted
        record["entries"] += len(found.rows)
        record["drops"] += found.drops
        record["rejected"] += len(found.rejects)
        record["empty_rows"] += found.empty
    if not text_files:  # lines of plain text are pretraining text by nature
        refuse_empty(dataset, converter=converter.name, rows=record["rows"] - record["rejected"],
                     empty=record["empty_rows"], columns=rows.column_names)
    return record, writes.submit(_write_record, connection, record, fingerprints=fingerprints, before=before,
                                 mixture=mixture, started=started, turns=turns)


def _converted(rows: RowSource, converter: Plugin, dataset: DatasetSpec,
               media: BuildMedia) -> Iterator[tuple[TableCuts, list[Use], Callable[[], EntryPrints]]]:
    """Each chunk's entries, row numbers counted from the dataset's first row, its rows' media and
    what computes its entries' fingerprints (:class:`.exact.ExactGroups`). A
    table that may name media takes the row path (:func:`.chunking.vectorised`)."""
    places = media.places(dataset)
    for chunk in rows.chunks(CHUNK_ROWS, CHUNK_BYTES):
        fast, table = converter.fast, chunk.table
        found = fast(table) if fast is not None and table is not None and vectorised(table) else None
        if found is None:
            yield _row_path(chunk, converter, dataset, media, places)
        else:
            assert table is not None
            local = TableCuts(rows=found.rows, cuts=found.cuts, empty=found.empty)
            found.rows = found.rows + chunk.first  # a new array: the fingerprints read the chunk's own
            yield found, [], partial(_table_prints, chunk, converter, local)


def _table_prints(chunk: RowChunk, converter: Plugin, found: TableCuts) -> EntryPrints:
    """The fingerprints of a chunk a vectorised path read (``found``: rows counted in the chunk)."""
    assert chunk.table is not None
    prints = table_prints(converter.name, chunk.table, found)
    return _sample_prints(chunk, converter, found) if prints is None else prints


def _sample_prints(chunk: RowChunk, converter: Plugin, found: TableCuts) -> EntryPrints:
    """The fingerprints of a chunk whose cuts a vectorised path found but whose messages it does
    not read (preference pairs): each row converted again."""
    prints = SamplePrints()
    rows, cuts = found.rows.tolist(), found.cuts.tolist()
    at = 0
    with collecting_drops():  # counted by the cut path already
        for number, raw in enumerate(chunk.rows()):
            end = at
            while end < len(rows) and rows[end] == number:
                end += 1
            prints.add(converter.func(raw), [None if cut == NO_CUT else cut for cut in cuts[at:end]])
            at = end
    return prints.result()


def _write_chunk(connection: Connection, dataset_id: int, first_id: int, found: TableCuts, uses: list[Use]) -> None:
    datasets = Datasets(connection)
    datasets.add_entries(dataset_id, first_id, found.rows, found.cuts)
    datasets.add_rejects(dataset_id, found.rejects)
    Media(connection).add_rows(dataset_id, [(*use[:5], first_id + use[5], use[6]) for use in uses])


def _row_lengths(rows: np.ndarray) -> np.ndarray:
    """Entries of each row in ``rows``, the row of each entry in entry order (a row's entries
    are consecutive)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    return np.diff(np.r_[starts, len(rows)])


def _write_record(connection: Connection, record: dict[str, Any], *, fingerprints: Future[list[dict[str, Any]]],
                  before: dict[str, tuple[int, int]], mixture: MixtureWriter | DeferredDraws, started: float,
                  turns: np.ndarray) -> DatasetSummary:
    """After a dataset's last chunk: its record, then its draw into the mixture; refused if a
    source file changed between the stat before loading, the fingerprint and now."""
    files = fingerprints.result()
    moved = changed_while_read(before, files)
    if moved:
        raise SourceError(f"dataset '{record['name']}': {', '.join(moved)} changed while the build read it; "
                          "build again once it is written")
    datasets = Datasets(connection)
    datasets.add({**record, "files": files})
    datasets.add_turns(record["id"], turns)
    mixture.add(record["id"], record["name"], first_entry=record["first_entry"], entries=record["entries"],
                rows=record["rows"] - record["rejected"])
    return DatasetSummary(name=record["name"], rows=record["rows"], entries=record["entries"], drops=record["drops"],
                          rejected=record["rejected"], empty=record["empty_rows"],
                          seconds=time.perf_counter() - started)


def _row_path(chunk: RowChunk, converter: Plugin, dataset: DatasetSpec, media: BuildMedia,
              places: tuple[str, ...]) -> tuple[TableCuts, list[Use], Callable[[], EntryPrints]]:
    """Convert every row of a chunk with the converter itself: any converter, errors named by row,
    each row's media read and its blocks listed, its entries fingerprinted."""
    uses: list[Use] = []
    prints = SamplePrints()
    row_numbers: list[int] = []
    cut_values: list[int] = []
    rejects: list[tuple[int, str]] = []
    empty = 0
    with collecting_drops() as drops:
        for number, raw in enumerate(chunk.rows(), start=chunk.first):
            kept_drops = len(drops)
            try:
                if isinstance(raw, BadRow):
                    raise SourceError(f"dataset '{dataset.name}': {dataset.path}: row {number}: {raw.reason}")
                sample, cuts, trains_nothing = expanded_row(converter.func, raw, dataset.name, number,
                                                            converter.name)
                found = media.row_uses(sample, dataset=dataset.name, row=number, places=places,
                                       offset=len(row_numbers), entries=len(cuts))
            except (ConversionError, SourceError) as exc:
                if dataset.on_error == "raise":
                    raise
                rejects.append((number, getattr(exc, "cause", None) or str(exc)))
                del drops[kept_drops:]
                continue
            media.keep(found)
            prints.add(sample, cuts)
            uses += found
            empty += trains_nothing
            row_numbers.extend([number] * len(cuts))
            cut_values.extend(NO_CUT if cut is None else cut for cut in cuts)
    return TableCuts(rows=np.array(row_numbers, dtype=np.int64), cuts=np.array(cut_values, dtype=np.int64),
                     drops=len(drops), rejects=rejects, empty=empty), uses, prints.result

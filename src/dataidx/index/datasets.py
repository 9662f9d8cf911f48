"""Index one dataset into the store: load it, expand its rows into entries, record the rest.

The vectorised path (a converter's ``fast`` function over the whole Arrow table) runs when the
table is valid UTF-8 and the converter offers one; otherwise every row goes through the
converter itself, where a failing row either stops the build (``on_error: raise``) with the
dataset, row, converter and cause, or is recorded as a reject with its reason (``skip``).
Preparing a dataset (load, expand) touches no database, so the build writes one dataset on a
writer thread while it prepares the next; content hashes of the source files are computed on
another thread meanwhile.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from sqlalchemy import Connection, insert

from ..convert import NO_CUT, TableCuts, collecting_drops, converters, row_cuts
from ..errors import ConversionError, SourceError
from ..plugins import Plugin
from ..sources import (
    ArrowRows,
    BadRow,
    DatasetRows,
    RenamedRows,
    RowSource,
    arrow_files_of,
    fingerprint_files,
    load,
    sources,
)
from ..spec import DatasetSpec
from ..store import Dataset, RejectedRow, insert_base_entries
from .mixtures import MixtureWriter


@dataclass
class DatasetSummary:
    name: str
    rows: int
    entries: int
    drops: int
    rejected: int = 0
    #: loading and expanding it, plus writing it (the two overlap with other datasets' steps)
    seconds: float = 0.0


@dataclass
class PreparedDataset:
    """One dataset loaded and expanded in memory, ready to be written by :func:`write_dataset`."""

    spec: DatasetSpec
    record: dict[str, Any]
    found: TableCuts
    fingerprints: Future[list[dict[str, Any]]]
    seconds: float = 0.0


def prepare_dataset(spec: DatasetSpec, position: int, first_entry: int, hashing: Executor) -> PreparedDataset:
    """Load dataset ``spec`` and compute its entries; touches no database, so it can run while
    the previous dataset is being written."""
    started = time.perf_counter()
    loaded = load(spec)
    fingerprints = hashing.submit(fingerprint_files, loaded.files)
    arrow_files = arrow_files_of(loaded.dataset)
    rows: RowSource = ArrowRows(arrow_files) if arrow_files else DatasetRows(loaded.dataset)
    if spec.columns:
        rows = RenamedRows(rows, spec.columns, spec.name)
    converter = converters.get(spec.converter or "none")
    table = rows.table() if converter.fast is not None else None
    found = converter.fast(table) if table is not None and _valid_utf8(table) else None
    if found is None:
        found = _row_path(rows, converter, spec)
    record = {
        "id": position + 1, "name": spec.name, "position": position, "path": spec.path, "source": spec.source,
        "loader_version": sources.get(spec.source).version, "split": spec.split, "converter": converter.name,
        "converter_version": converter.version, "info": spec.info(), "rows": len(rows), "entries": len(found.rows),
        "first_entry": first_entry, "drops": found.drops, "arrow_files": arrow_files,
        "rejected": len(found.rejects), "on_error": spec.on_error,
    }
    return PreparedDataset(spec, record, found, fingerprints, time.perf_counter() - started)


def write_dataset(connection: Connection, prepared: PreparedDataset, mixture: MixtureWriter) -> DatasetSummary:
    """Insert a prepared dataset: its record, base entries and rejected rows, then its draw."""
    started = time.perf_counter()
    record, found = prepared.record, prepared.found
    connection.execute(insert(Dataset), {**record, "files": prepared.fingerprints.result()})
    insert_base_entries(connection, record["id"], record["first_entry"], found.rows, found.cuts)
    if found.rejects:
        connection.execute(insert(RejectedRow), [
            {"dataset_id": record["id"], "row": row, "reason": reason} for row, reason in found.rejects
        ])
    mixture.add(record["id"], record["name"], record["first_entry"], record["entries"])
    return DatasetSummary(record["name"], record["rows"], record["entries"], record["drops"], record["rejected"],
                          prepared.seconds + time.perf_counter() - started)


def _valid_utf8(table: pa.Table) -> bool:
    # datasets' json loader stores invalid UTF-8 as is; only a full validation finds it.
    try:
        table.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _row_path(rows: RowSource, converter: Plugin, spec: DatasetSpec) -> TableCuts:
    """Convert every row with the converter itself: any converter, errors named by row."""
    row_numbers: list[int] = []
    cut_values: list[int] = []
    rejects: list[tuple[int, str]] = []
    with collecting_drops() as drops:
        for number, raw in enumerate(rows.iter_rows()):
            kept_drops = len(drops)
            try:
                if isinstance(raw, BadRow):
                    raise SourceError(f"dataset '{spec.name}': {spec.path}: row {number}: {raw.reason}")
                cuts = row_cuts(converter.func, raw, spec.name, number, converter.name)
            except (ConversionError, SourceError) as exc:
                if spec.on_error == "raise":
                    raise
                rejects.append((number, getattr(exc, "cause", None) or str(exc)))
                del drops[kept_drops:]
                continue
            row_numbers.extend([number] * len(cuts))
            cut_values.extend(NO_CUT if cut is None else cut for cut in cuts)
    return TableCuts(rows=np.array(row_numbers, dtype=np.int64), cuts=np.array(cut_values, dtype=np.int64),
                     drops=len(drops), rejects=rejects)

"""Index one dataset into the store: load it, expand its rows into entries, record the rest.

The vectorised path (a converter's ``fast`` function over the whole Arrow table) runs when the
table is valid UTF-8 and the converter offers one; otherwise every row goes through the
converter itself, where a failing row either stops the build (``on_error: raise``) with the
dataset, row, converter and cause, or is recorded as a reject with its reason (``skip``).
Content hashes of the source files are computed on another thread meanwhile.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlalchemy import Connection, insert, update

from .arrow_cuts import NO_CUT, TableCuts
from .bulk import insert_base_entries
from .config import DatasetSpec
from .converters import collecting_drops, converters, row_cuts
from .errors import ConversionError, SourceError
from .fingerprints import fingerprint_files
from .plugins import Plugin
from .rows import ArrowRows, BadRow, DatasetRows, RowSource, arrow_files_of
from .schema import Dataset, RejectedRow
from .sources import load, sources


@dataclass
class DatasetSummary:
    name: str
    rows: int
    entries: int
    drops: int
    rejected: int = 0


def index_dataset(connection: Connection, spec: DatasetSpec, position: int, first_entry: int,
                  hashing: Executor) -> DatasetSummary:
    """Write dataset ``spec`` (the ``position``-th of the config) and its base entries."""
    loaded = load(spec)
    fingerprints = hashing.submit(fingerprint_files, loaded.files)
    arrow_files = arrow_files_of(loaded.dataset)
    rows: RowSource = ArrowRows(arrow_files) if arrow_files else DatasetRows(loaded.dataset)
    converter = converters.get(spec.converter or "none")
    dataset_id = position + 1
    # The dataset row goes first so the base entries' foreign key holds; counts follow below.
    connection.execute(insert(Dataset), {
        "id": dataset_id, "name": spec.name, "position": position, "path": spec.path, "source": spec.source,
        "loader_version": sources.get(spec.source).version, "split": spec.split, "converter": converter.name,
        "converter_version": converter.version, "info": spec.info(), "rows": len(rows), "entries": 0,
        "first_entry": first_entry, "drops": 0, "files": [], "arrow_files": arrow_files, "rejected": 0,
        "on_error": spec.on_error,
    })
    table = rows.table() if converter.fast is not None else None
    found = converter.fast(table) if table is not None and _valid_utf8(table) else None
    if found is None:
        found = _row_path(rows, converter, spec)
    insert_base_entries(connection, dataset_id, first_entry, found.rows, found.cuts)
    if found.rejects:
        connection.execute(insert(RejectedRow), [
            {"dataset_id": dataset_id, "row": row, "reason": reason} for row, reason in found.rejects
        ])
    summary = DatasetSummary(spec.name, len(rows), len(found.rows), found.drops, len(found.rejects))
    connection.execute(update(Dataset).where(Dataset.id == dataset_id).values(
        entries=summary.entries, drops=summary.drops, rejected=summary.rejected, files=fingerprints.result(),
    ))
    return summary


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

"""``dataidx build``: config in, finished store out, written once and renamed into place.

Each dataset is loaded, every row converted once and expanded into entries; the base index and
the default mixture are inserted in one transaction into a temporary file next to the target,
which replaces the target only when complete. A failed build leaves no half store behind and
never touches an existing one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, insert, update

from . import __version__
from .arrow_cuts import NO_CUT, TableCuts
from .bulk import insert_base_entries
from .config import Config, DatasetSpec, load_config
from .converters import collecting_drops, converters, row_cuts
from .errors import DataidxError
from .fingerprints import stat_files
from .mixing import MixtureSummary, write_mixture
from .plugins import Plugin
from .rows import ArrowRows, DatasetRows, RowSource, arrow_files_of
from .sampling import DEFAULT_SEED, check_sampling
from .schema import Build, Dataset
from .sources import load, sources
from .store import create_store, publish, remove_temporary

Progress = Callable[[str], None]


@dataclass
class DatasetSummary:
    name: str
    rows: int
    entries: int
    drops: int


@dataclass
class BuildSummary:
    """What a build did, for the CLI's summary and for callers."""

    store: str
    datasets: list[DatasetSummary] = field(default_factory=list)
    mixture: MixtureSummary | None = None
    seconds: float = 0.0


def build(
    config: str | os.PathLike[str] | Config,
    output: str | os.PathLike[str],
    *,
    seed: int = DEFAULT_SEED,
    sampling: str = "exact",
    progress: Progress | None = None,
) -> BuildSummary:
    """Build a store at ``output`` from a v1 dataset YAML (or a bare data file/folder).

    Example::

        summary = build("data/demo_sft.yaml", "demo.db", seed=7)
        DataEngine("demo.db")[0]
    """
    check_sampling(sampling)
    started = time.perf_counter()
    config = config if isinstance(config, Config) else load_config(config)
    output = Path(output)
    if output.is_dir():
        raise DataidxError(f"{output}: is a folder; give the store's file name")
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    remove_temporary(temporary)
    say = progress or (lambda _message: None)
    try:
        engine = create_store(temporary)
        try:
            summary = BuildSummary(store=str(output))
            with engine.begin() as connection:
                first_entry = 1
                for position, spec in enumerate(config.datasets):
                    say(f"loading dataset '{spec.name}' from {spec.path}")
                    ds_summary = _index_dataset(connection, spec, position, first_entry)
                    first_entry += ds_summary.entries
                    summary.datasets.append(ds_summary)
                say(f"drawing mixture 'default' (seed {seed}, {sampling})")
                summary.mixture = write_mixture(connection, config, "default", seed=seed, sampling=sampling)
                summary.seconds = time.perf_counter() - started
                connection.execute(
                    insert(Build),
                    {
                        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        "config_origin": config.origin,
                        "config_text": config.text,
                        "config_sha256": config.sha256,
                        "dataidx_version": __version__,
                        "seconds": summary.seconds,
                    },
                )
        finally:
            engine.dispose()
        publish(temporary, output)
    except BaseException:
        remove_temporary(temporary)
        raise
    return summary


def _index_dataset(connection: Connection, spec: DatasetSpec, position: int, first_entry: int) -> DatasetSummary:
    loaded = load(spec)
    arrow_files = arrow_files_of(loaded.dataset)
    rows: RowSource = ArrowRows([f["path"] for f in arrow_files]) if arrow_files else DatasetRows(loaded.dataset)
    converter = converters.get(spec.converter or "none")
    dataset_id = position + 1
    # The dataset row goes first so the base entries' foreign key holds; counts follow below.
    connection.execute(
        insert(Dataset),
        {
            "id": dataset_id,
            "name": spec.name,
            "position": position,
            "path": spec.path,
            "source": spec.source,
            "loader_version": sources.get(spec.source).version,
            "split": spec.split,
            "converter": converter.name,
            "converter_version": converter.version,
            "info": spec.info(),
            "rows": len(rows),
            "entries": 0,
            "first_entry": first_entry,
            "drops": 0,
            "files": stat_files(loaded.files),
            "arrow_files": arrow_files,
        },
    )
    table = rows.table() if converter.fast is not None else None
    found = converter.fast(table) if table is not None else None
    if found is None:
        found = _row_path(rows, converter, spec.name)
    entries = len(found.rows)
    insert_base_entries(connection, dataset_id, first_entry, found.rows, found.cuts)
    connection.execute(update(Dataset).where(Dataset.id == dataset_id).values(entries=entries, drops=found.drops))
    return DatasetSummary(name=spec.name, rows=len(rows), entries=entries, drops=found.drops)


def _row_path(rows: RowSource, converter: Plugin, dataset: str) -> TableCuts:
    """Convert every row with the converter itself: any converter, errors named by row."""
    row_numbers: list[int] = []
    cut_values: list[int] = []
    with collecting_drops() as drops:
        for row_number, raw in enumerate(rows.iter_rows()):
            for cut in row_cuts(converter.func, raw, dataset, row_number, converter.name):
                row_numbers.append(row_number)
                cut_values.append(NO_CUT if cut is None else cut)
    return TableCuts(rows=np.array(row_numbers, dtype=np.int64), cuts=np.array(cut_values, dtype=np.int64),
                     drops=len(drops))

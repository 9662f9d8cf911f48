"""``dataidx build``: config in, finished store out, written once and renamed into place.

Each dataset is loaded, every row converted once and expanded into entries; the base index and
the default mixture are inserted in one transaction into a temporary file next to the target,
which replaces the target only when complete. A failed build leaves no half store behind and
never touches an existing one. A store in PostgreSQL is built the same way into a local
working copy, then published into its schema in one transaction.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import insert

from . import __version__
from .config import Config, load_config
from .errors import DataidxError
from .indexing import DatasetSummary, prepare_dataset, write_dataset
from .locations import PostgresStore, is_url, store_location
from .mixing import MixtureSummary, MixtureWriter
from .sampling import DEFAULT_SEED
from .schema import Build
from .sources import materialising_streams_into
from .store import (
    create_store,
    publish,
    refuse_to_overwrite,
    remove_stale_temporaries,
    remove_temporary,
    stamp,
    writer_lock,
)

Progress = Callable[[str], None]


@dataclass
class BuildSummary:
    """What a build did, for the CLI's summary and for callers."""

    store: str
    datasets: list[DatasetSummary] = field(default_factory=list)
    mixture: MixtureSummary | None = None
    seconds: float = 0.0


def streams_folder(store: Path | PostgresStore) -> Path:
    """Where a store's streaming sources are materialised: ``<store>.streams`` beside a file; in
    the dataidx cache folder of the building machine for a store in PostgreSQL."""
    if isinstance(store, PostgresStore):
        from .cache import cache_dir

        key = hashlib.sha256(f"{store.shown}|{store.schema}".encode()).hexdigest()[:16]
        return cache_dir() / "postgres-streams" / key
    return store.with_name(store.name + ".streams")


def prune_streams(folder: Path, used: set[str]) -> None:
    """Remove materialised streams the new store does not read (a source changed since)."""
    if not folder.is_dir():
        return
    used = {os.path.realpath(path) for path in used}
    for cache in folder.glob("*/*"):  # <builder>/<config-and-fingerprint>
        if cache.is_dir() and not any(os.path.realpath(path) in used for path in cache.rglob("*.arrow")):
            shutil.rmtree(cache, ignore_errors=True)


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
    started = time.perf_counter()
    config = config if isinstance(config, Config) else load_config(config)
    location = store_location(output) if is_url(output) else Path(output)
    if isinstance(location, PostgresStore):
        return _build_postgres(config, location, seed, sampling, progress, started)
    output = location
    if output.is_dir():
        raise DataidxError(f"{output}: is a folder; give the store's file name")
    if not output.parent.is_dir():
        raise DataidxError(f"{output}: folder {output.parent} does not exist")
    if not os.access(output.parent, os.W_OK):
        raise DataidxError(f"{output}: folder {output.parent} is not writable")
    refuse_to_overwrite(output)
    with writer_lock(output):
        return _build(config, output, seed, sampling, progress, started)


def _build(config: Config, output: Path, seed: int, sampling: str, progress: Progress | None,
           started: float) -> BuildSummary:
    remove_stale_temporaries(output)
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    remove_temporary(temporary)
    try:
        summary, used_files = _write(config, temporary, output, seed, sampling, progress, started)
        publish(temporary, output)
        prune_streams(streams_folder(output.resolve()), used_files)
    except BaseException:
        remove_temporary(temporary)
        raise
    return summary


def _build_postgres(config: Config, store: PostgresStore, seed: int, sampling: str, progress: Progress | None,
                    started: float) -> BuildSummary:
    from .pg_publish import postgres_writer, working_folder
    from .pg_publish import publish as publish_postgres
    from .pg_swap import refuse_foreign_schema

    with postgres_writer(store) as server, working_folder() as folder:
        refuse_foreign_schema(server, store)  # before the work, not only when publishing it
        server.commit()
        summary, used_files = _write(config, folder / "store.db", store, seed, sampling, progress, started)
        (progress or (lambda _message: None))(f"publishing into schema '{store.schema}' of {store}")
        publish_postgres(folder / "store.db", store, server)
        prune_streams(streams_folder(store), used_files)
    return summary


def _write(config: Config, temporary: Path, output: Path | PostgresStore, seed: int, sampling: str,
           progress: Progress | None, started: float) -> tuple[BuildSummary, set[str]]:
    """Write the whole store into the new file ``temporary``; what was built and the Arrow
    files of materialised streams it reads."""
    say = progress or (lambda _message: None)
    streams = streams_folder(output.resolve() if isinstance(output, Path) else output)
    engine = create_store(temporary)
    try:
        summary = BuildSummary(store=str(output))
        with (
            engine.begin() as connection,
            ThreadPoolExecutor(1, thread_name_prefix="dataidx-hash") as hashing,
            ThreadPoolExecutor(1, thread_name_prefix="dataidx-write") as writer,
        ):
            # SQLite's inserts release the GIL: dataset k is written, and drawn into the default
            # mixture, while dataset k + 1 is prepared.
            mixture = MixtureWriter(connection, config, "default", seed=seed, sampling=sampling)
            first_entry = 1
            written = []
            used_files: set[str] = set()
            for position, spec in enumerate(config.datasets):
                say(f"loading dataset '{spec.name}' from {spec.path}"
                    + (f" (streaming, materialised into {streams})" if spec.streaming else ""))
                with materialising_streams_into(streams):
                    prepared = prepare_dataset(spec, position, first_entry, hashing)
                first_entry += prepared.record["entries"]
                used_files.update(entry["path"] for entry in prepared.record["arrow_files"] or [])
                written.append(writer.submit(write_dataset, connection, prepared, mixture))
            summary.datasets = [future.result() for future in written]
            summary.mixture = mixture.finish()
            summary.seconds = time.perf_counter() - started
            stamp(connection)
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
    return summary, used_files

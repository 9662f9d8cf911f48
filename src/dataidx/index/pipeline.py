"""``dataidx build``: config in, finished store out.

Each dataset is loaded, every row converted once and expanded into entries; the base index and
the default mixture are inserted in one transaction into a new store (:func:`~dataidx.store.creating`),
which takes the place of the target only when complete. A failed build leaves no half store
behind and never touches an existing one.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
from sqlalchemy import Connection

from .._version import __version__
from ..config import load_config
from ..errors import UsageError
from ..progress import MessageProgress
from ..sources import materialising_streams_into
from ..spec import DEFAULT_SEED, Config
from ..store import Datasets, Mixtures, NewStore, creating
from .datasets import DatasetSummary, Writes, index_dataset
from .exact import ExactGroups, ExactSummary
from .holdout import DeferredDraws, check_val_size, held_out_entries, whole_datasets, with_evaluation
from .media import BuildMedia
from .mixtures import MixtureSummary, MixtureWriter

logger = logging.getLogger(__name__)


@dataclass
class BuildSummary:
    """What a build did, for the CLI's summary and for callers: made when the build is complete, so
    every field is there."""

    store: str
    datasets: list[DatasetSummary]
    mixture: MixtureSummary
    seconds: float
    #: the held-out mixture ``eval``, with ``val_size``
    evaluation: MixtureSummary | None = None
    #: exact duplicates and shared prompts found (views ``exact_duplicates``, ``same_prompts``)
    exact: ExactSummary = field(default_factory=ExactSummary)


def build(
    config: str | os.PathLike[str] | Config,
    output: str | os.PathLike[str],
    *,
    seed: int = DEFAULT_SEED,
    sampling: str = "exact",
    progress: MessageProgress | None = None,
    replace: bool = False,
    specs: Collection[str] = (),
    val_size: float | int | str | None = None,
    evaluation: str | os.PathLike[str] | Config | None = None,
) -> BuildSummary:
    """Build a store at ``output`` (a file or a PostgreSQL URL) from a v1 dataset YAML (or a bare
    data file or folder).

    Example::

        summary = build("data/demo_sft.yaml", "demo.db", seed=7)
        DataEngine("demo.db")[0]

    A store already at ``output`` that holds more than this build writes again (mixture
    ``default``, and the render ``specs`` the caller renders next) is refused unless ``replace``.
    With ``val_size`` (a fraction in (0, 1) or a count of rows), a seeded draw of the rows is held
    out as mixture ``eval``, which the default mixture and later ones leave out (:mod:`.holdout`);
    with ``evaluation`` (a second config, v1's ``eval_dataset``), its datasets are mixture ``eval``.
    """
    started = time.perf_counter()
    if val_size is not None and evaluation is not None:
        raise UsageError("give --eval (eval datasets) or --val-size (a hold-out of the train rows), not both")
    held: float | int | set[str] | None = None if val_size is None else check_val_size(val_size)
    config = config if isinstance(config, Config) else load_config(config)
    if evaluation is not None:
        config, held = with_evaluation(config, evaluation if isinstance(evaluation, Config)
                                       else load_config(evaluation))
    with creating(output, progress, replace=replace, specs=specs) as new:
        return _write(config, new, seed=seed, sampling=sampling, progress=progress, started=started, held=held)


def _write(config: Config, new: NewStore, *, seed: int, sampling: str, progress: MessageProgress | None,
           started: float, held: float | int | set[str] | None) -> BuildSummary:
    """Fill the new store: every dataset, the default mixture and the build's provenance."""
    say = progress or (lambda _message: None)
    with (
        new.engine.begin() as connection,
        ThreadPoolExecutor(1, thread_name_prefix="dataidx-hash") as hashing,
        ThreadPoolExecutor(1, thread_name_prefix="dataidx-write") as writer,
    ):
        # SQLite's inserts release the GIL: one chunk is written, and each dataset drawn into
        # the default mixture after its last chunk, while the next chunk is converted.
        mixture = (DeferredDraws() if held is not None  # drawn once every dataset's rows are known
                   else MixtureWriter(connection, config, "default", seed=seed, sampling=sampling, whole_budgets=True))
        writes = Writes(writer)
        media = BuildMedia()  # each distinct media file read once, whichever datasets name it
        exact = ExactGroups()  # every entry's fingerprints; the candidates hashed once all are read
        first_entry = 1
        written = []
        folder = Datasets.folder_of(new.location)  # the sources' places relative to it are recorded too
        for position, dataset in enumerate(config.datasets):
            say(f"loading dataset '{dataset.name}' from {dataset.path}"
                + (f" (streaming, materialised into {new.streams})" if dataset.streaming else ""))
            with materialising_streams_into(new.streams):
                record, done = index_dataset(dataset, position=position, first_entry=first_entry, connection=connection,
                                             writes=writes, hashing=hashing, mixture=mixture, media=media,
                                             exact=exact, folder=folder)
            first_entry += record["entries"]
            new.used_streams.update(entry["path"] for entry in record["arrow_files"] or [])
            written.append(done)
        writes.drain()
        datasets = [future.result() for future in written]
        media.write(connection, folder)
        found = exact.write(Datasets(connection))
        if isinstance(mixture, DeferredDraws):
            assert held is not None
            drawn, evaluation = _hold_out(connection, config, mixture, held=held, seed=seed, sampling=sampling)
        else:
            drawn, evaluation = mixture.finish(), None
        if drawn.taken_whole:
            logger.warning(
                "datasets with a token budget (%s) are whole in the default mixture: a budget counts tokens under a "
                "render spec, so draw it with dataidx render, then dataidx mix STORE CONFIG --name NAME --spec SPEC",
                ", ".join(drawn.taken_whole))
        summary = BuildSummary(store=str(new.location), datasets=datasets, mixture=drawn,
                               seconds=time.perf_counter() - started, evaluation=evaluation, exact=found)
        Datasets(connection).add_build(
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), config_origin=config.origin,
            config_text=config.text, config_sha256=config.sha256, dataidx_version=__version__, seconds=summary.seconds)
    return summary


def _hold_out(connection: Connection, config: Config, deferred: DeferredDraws, *, held: float | int | set[str],
              seed: int, sampling: str) -> tuple[MixtureSummary, MixtureSummary]:
    """Write mixture ``eval`` (every cut of the held-out rows, once, in base order), then the default
    mixture from the other rows; their summaries, the default's first. ``held`` is ``--val-size``, or
    the ``--eval`` datasets' names (held out whole, and in no training mixture)."""
    names = held if isinstance(held, set) else None
    masks = (whole_datasets(deferred, held) if isinstance(held, set)
             else held_out_entries(connection, deferred, val_size=held, seed=seed))
    evaluation = MixtureWriter(connection, config, Mixtures.HELD_OUT, seed=seed, sampling="exact", whole=True,
                               whole_budgets=True)
    for added, (mask, held_rows) in zip(deferred.added, masks):
        if names is not None and added.name not in names:
            continue
        evaluation.add(added.dataset_id, added.name, first_entry=added.first_entry, entries=added.entries,
                       rows=held_rows, keep=np.flatnonzero(mask))
    held_summary = evaluation.finish()  # its positions taken, the default mixture's follow
    training = MixtureWriter(connection, config, "default", seed=seed, sampling=sampling, whole_budgets=True)
    for added, (mask, held_rows) in zip(deferred.added, masks):
        if names is not None and added.name in names:
            continue
        training.add(added.dataset_id, added.name, first_entry=added.first_entry, entries=added.entries,
                     rows=added.rows - held_rows, keep=np.flatnonzero(~mask))
    return training.finish(), held_summary

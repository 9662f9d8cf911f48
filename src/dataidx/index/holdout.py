"""Evaluation rows held out of training: ``dataidx build --val-size``, LLaMA-Factory's ``val_size``.

The hold-out is mixture ``eval`` (``Mixtures.HELD_OUT``), a mixture like any other, so
``DataEngine(store, mixture="eval")`` serves it; what makes it held out is that every other mixture,
the build's and ``dataidx mix``'s, leaves out each row it holds, all the row's cuts. Rows are
drawn, not entries, so no cut of an eval row is trained on. As LLaMA-Factory's ``split_dataset``
(``train_test_split(test_size=val_size, seed=seed)``), the draw is over all the datasets' rows
together: a fraction in (0, 1) holds out ``ceil(fraction * rows)``, an int that many rows.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import Connection

from ..errors import UsageError
from ..spec import Config
from ..store import Datasets, Mixtures
from .sampling import derive_seed


@dataclass
class _Added:
    """One dataset's arguments to :meth:`MixtureWriter.add`, kept until every dataset is written."""

    dataset_id: int
    name: str
    first_entry: int
    entries: int
    rows: int


@dataclass
class DeferredDraws:
    """Stands in for the build's :class:`MixtureWriter`: a hold-out draws from every dataset's rows
    at once, so the datasets' draws wait until the last one is written."""

    added: list[_Added] = field(default_factory=list)

    def add(self, dataset_id: int, name: str, *, first_entry: int, entries: int, rows: int) -> None:
        self.added.append(_Added(dataset_id, name, first_entry, entries, rows))


def check_val_size(val_size: float | int | str) -> float | int:
    """A fraction in (0, 1), or a whole count of rows (1 or more), as LLaMA-Factory reads ``val_size``
    (``--val-size`` as written: ``1`` is one row, ``1.0`` a fraction, every row, refused)."""
    if isinstance(val_size, str):
        text = val_size.strip()
        try:
            val_size = int(text) if text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise UsageError(f"--val-size {text}: give a fraction of the rows in (0, 1), or a whole number of "
                             "rows") from None
    if isinstance(val_size, int) and not isinstance(val_size, bool) and val_size >= 1:
        return val_size
    if isinstance(val_size, float) and 0 < val_size < 1:
        return val_size
    whole = isinstance(val_size, float) and val_size == 1
    raise UsageError(f"--val-size {val_size!s}: give a fraction of the rows in (0, 1), or a whole number of rows"
                     + (" (1.0 is every row; 1 holds out one)" if whole else ""))


def with_evaluation(train: Config, evaluation: Config) -> tuple[Config, set[str]]:
    """One config of the train datasets then the eval ones (v1's ``train_dataset`` and
    ``eval_dataset``), and the eval datasets' names; refused if a name is in both or an eval
    dataset reads a train dataset's file and split, which would evaluate on training rows."""
    names = {dataset.name for dataset in train.datasets}
    read = {(_place(dataset.path, dataset.source), dataset.split): dataset.name for dataset in train.datasets}
    for dataset in evaluation.datasets:
        if dataset.name in names:
            raise UsageError(f"{evaluation.origin}: dataset '{dataset.name}' is also a dataset of {train.origin}; "
                             "give the eval datasets names of their own")
        same = read.get((_place(dataset.path, dataset.source), dataset.split))
        if same is not None:
            raise UsageError(f"{evaluation.origin}: dataset '{dataset.name}' reads {dataset.path} (split "
                             f"'{dataset.split}') as train dataset '{same}' does: eval rows would be trained on")
    text = f"{train.text.rstrip()}\n# eval datasets (--eval {evaluation.origin}):\n{evaluation.text}"
    return (Config(origin=train.origin, text=text, datasets=[*train.datasets, *evaluation.datasets]),
            {dataset.name for dataset in evaluation.datasets})


def _place(path: str, source: str) -> str:
    """Where a dataset reads: a local path resolved (links, ``..``), any other source's as written."""
    return os.path.realpath(path) if source == "local" else path


def whole_datasets(deferred: DeferredDraws, names: set[str]) -> list[tuple[np.ndarray, int]]:
    """As :func:`held_out_entries` for ``--eval``: datasets ``names`` held out whole, the rest not at all."""
    return [(np.full(added.entries, added.name in names), added.rows if added.name in names else 0)
            for added in deferred.added]


def _held_count(val_size: float | int, rows: int) -> int:
    """How many of ``rows`` rows to hold out; refused if no row would be left to train on."""
    count = math.ceil(val_size * rows) if isinstance(val_size, float) else val_size
    if count >= rows:
        raise UsageError(f"--val-size {val_size:g} holds out {count:,} of the {rows:,} rows with entries; "
                         "at least one must be left to train on")
    return count


def held_out_entries(connection: Connection, deferred: DeferredDraws, *, val_size: float | int,
                      seed: int) -> list[tuple[np.ndarray, int]]:
    """Draw the held-out rows over every dataset's rows together (seeded, as LLaMA-Factory's
    ``train_test_split``); per dataset, which of its entries they are (every cut) and how many rows."""
    datasets = Datasets(connection)
    entry_rows = [datasets.entry_rows(added.first_entry, added.entries) for added in deferred.added]
    distinct = [np.unique(rows) for rows in entry_rows]
    total = sum(len(rows) for rows in distinct)
    count = _held_count(val_size, total)
    rng = np.random.default_rng(derive_seed(seed, Mixtures.HELD_OUT))
    chosen = np.zeros(total, dtype=bool)
    chosen[rng.permutation(total)[:count]] = True
    held: list[tuple[np.ndarray, int]] = []
    start = 0
    for rows, each in zip(entry_rows, distinct):
        picked = each[chosen[start : start + len(each)]]
        held.append((np.isin(rows, picked), len(picked)))
        start += len(each)
    return held


def not_held_out(connection: Connection, datasets: list[Datasets.Stored]) -> dict[int, tuple[np.ndarray, int]]:
    """Per dataset with held-out rows: the offsets of its entries a training mixture may draw (every
    cut of a held-out row is left out), and how many rows are held out."""
    if not Mixtures(connection).exists(Mixtures.HELD_OUT):
        return {}
    kept = {}
    for dataset in datasets:
        held = Mixtures(connection).held_out_rows(dataset.id)
        if held:
            rows = Datasets(connection).entry_rows(dataset.first_entry, dataset.entries)
            kept[dataset.id] = (np.flatnonzero(~np.isin(rows, held)), len(held))
    return kept


def without_listed(connection: Connection, datasets: list[Datasets.Stored], kept: dict[int, tuple[np.ndarray, int]],
                   listed: list[int]) -> dict[int, tuple[np.ndarray, int]]:
    """``kept`` (per dataset: the entry offsets a training mixture may draw, and the rows left
    out) without the rows of base entries ``listed`` (an evidence list's: ``mix --exclude``),
    every cut of such a row left out as a held-out row's is. A dataset no list touches is drawn
    as before, row for row."""
    if not listed:
        return kept
    ids = np.asarray(listed, dtype=np.int64)
    out = dict(kept)
    for dataset in datasets:
        inside = ids[(ids >= dataset.first_entry) & (ids < dataset.first_entry + dataset.entries)] - dataset.first_entry
        if not len(inside):
            continue
        rows = Datasets(connection).entry_rows(dataset.first_entry, dataset.entries)
        keep, left_out = out.get(dataset.id, (np.arange(dataset.entries), 0))
        listed_rows = np.isin(rows[keep], np.unique(rows[inside]))
        out[dataset.id] = (keep[~listed_rows], left_out + len(np.unique(rows[keep][listed_rows])))
    return out

"""``dataidx mix``: a named mixture drawn into an existing store from its base index alone, by
the sizes, weights and token budgets of a config (:class:`.mixtures.MixtureWriter` draws it),
without the rows of held-out evaluation sets and of the evidence lists it is asked to exclude."""

from __future__ import annotations

import os
from collections.abc import Sequence

from sqlalchemy import Connection

from ..config import load_config
from ..errors import NotFoundError, UsageError
from ..spec import DEFAULT_SEED, Config
from ..store import Datasets, Evidence, Mixtures, rewriting
from .holdout import not_held_out, without_listed
from .mixtures import MixtureSummary, MixtureWriter
from .token_counts import MixtureLengths, read_mixture_lengths


def write_mixture(connection: Connection, config: Config, name: str, *, seed: int, sampling: str, epochs: int = 1,
                  lengths: MixtureLengths | None = None, excludes: Sequence[str] = ()) -> MixtureSummary:
    """Draw mixture ``name`` from the config's sizes, weights and budgets over a store's datasets,
    without the entries evidence lists ``excludes`` name (sizes and budgets met from the rest)."""
    stored = {dataset.name: dataset for dataset in Datasets(connection).by_id().values()}
    missing = [dataset.name for dataset in config.datasets if dataset.name not in stored]
    if missing:
        raise NotFoundError(
            f"{config.origin}: mixture '{name}': datasets not in the store: {', '.join(missing)} "
            f"(the store has: {', '.join(stored)})"
        )
    if name == Mixtures.HELD_OUT:
        raise UsageError(f"mixture '{name}' is the held-out evaluation set, made by dataidx build --val-size; "
                         "choose another --name")
    writer = MixtureWriter(connection, config, name, seed=seed, sampling=sampling, epochs=epochs, lengths=lengths,
                           excludes=excludes)
    drawn = [stored[dataset.name] for dataset in config.datasets]
    kept = without_listed(connection, drawn, not_held_out(connection, drawn), Evidence(connection).flagged(excludes))
    for epoch in range(epochs):
        if epoch:
            writer.next_epoch()
        for dataset in config.datasets:
            row = stored[dataset.name]
            keep, held_rows = kept.get(row.id, (None, 0))
            if keep is not None and not len(keep):
                raise UsageError(f"{config.origin}: dataset '{row.name}' is held out whole for evaluation (mixture "
                                 f"'{Mixtures.HELD_OUT}') or listed whole by --exclude: this mixture cannot draw it")
            writer.add(row.id, row.name, first_entry=row.first_entry, entries=row.entries,
                       rows=row.rows - row.rejected - held_rows, keep=keep)
    return writer.finish()


def add_mixture(
    store: str | os.PathLike[str], config: str | os.PathLike[str] | Config, name: str, *,
    seed: int = DEFAULT_SEED, sampling: str = "exact", epochs: int = 1, spec: str | None = None,
    excludes: Sequence[str] = (),
) -> MixtureSummary:
    """Add mixture ``name`` to an existing store from its base index alone (sources may be gone).

    Only the config's dataset names, ``size``, ``weight`` and token budgets are used; budgets
    count tokens under render spec ``spec``, which the mixture records. ``epochs`` stores that
    many epochs, each drawn with its own seed. ``excludes`` names evidence lists (``dataidx
    dedup``, ``decontaminate``) whose entries the mixture never draws. Other mixtures are never
    touched. The store is rewritten on a copy and renamed into place.

    Example::

        add_mixture("demo.db", "data/demo_sft.yaml", "seed7", seed=7)
        add_mixture("demo.db", "data/demo_budgets.yaml", "by_tokens", spec="default", epochs=3)
        DataEngine("demo.db", mixture="by_tokens", epoch=1)
    """
    config = config if isinstance(config, Config) else load_config(config, plugins=False)
    lengths, read = (None, None) if spec is None else read_mixture_lengths(store, spec)
    with rewriting(store, unchanged=read, task="drawing by tokens", command="mix") as connection:
        return write_mixture(connection, config, name, seed=seed, sampling=sampling, epochs=epochs, lengths=lengths,
                             excludes=excludes)

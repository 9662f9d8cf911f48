"""Write a named mixture of a store's base index: per-dataset seeded draws, positions by rowid.

Only the stored base index is read (dataset ids, first entry, entry counts), never the sources,
so a mixture can be drawn again or added later with the source files gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sqlalchemy import Connection, func, insert, select, update

from .._version import __version__
from ..config import load_config
from ..errors import NotFoundError, UsageError
from ..spec import DEFAULT_SEED, Config
from ..store import Dataset, Mixture, MixtureDataset, PositionWriter, draw_counts, rewriting
from .sampling import Span, check_sampling, derive_seed, draw, requested_count


@dataclass
class MixtureSummary:
    name: str
    seed: int
    sampling: str
    entries: int
    datasets: dict[str, int] = field(default_factory=dict)


class MixtureWriter:
    """Appends one mixture to a store, dataset by dataset, positions in config order.

    A dataset's draw needs only its id, first entry and entry count, so the build can draw each
    dataset as soon as it is written, while it prepares the next one.
    """

    def __init__(self, connection: Connection, config: Config, name: str, *, seed: int, sampling: str) -> None:
        check_sampling(sampling)
        if not -(2**63) <= seed < 2**63:
            raise UsageError(f"seed {seed} does not fit in 64 bits")
        if connection.execute(select(Mixture.id).where(Mixture.name == name)).first() is not None:
            raise UsageError(f"mixture '{name}' already exists; remove it first or choose another --name")
        self.connection, self.config, self.specs = connection, config, {spec.name: spec for spec in config.datasets}
        # Position space is shared: each mixture takes the stretch after the last one.
        end = connection.execute(select(func.max(Mixture.start + Mixture.entries))).scalar()
        self.start = self.position = end or 1
        self.summary = MixtureSummary(name=name, seed=seed, sampling=sampling, entries=0)
        self.mixture_id = connection.execute(insert(Mixture).values(
            name=name, seed=seed, sampling=sampling, start=self.start, entries=0, config_sha256=config.sha256,
            config_text=config.text, dataidx_version=__version__,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )).inserted_primary_key[0]

    def add(self, dataset_id: int, name: str, first_entry: int, entries: int, rows: int) -> None:
        """Draw dataset ``name`` (entries ``first_entry ...`` from ``rows`` rows that were not
        rejected) by its spec's size and weight."""
        spec, summary = self.specs[name], self.summary
        dataset_seed = derive_seed(summary.seed, name)
        chosen = draw(entries, spec.size, spec.weight, summary.sampling, dataset_seed)
        positions = PositionWriter(self.connection, self.mixture_id, self.position)
        for chunk in chosen.chunks():
            if isinstance(chunk, Span):
                positions.add_run(first_entry + chunk.start, chunk.length)
            else:
                positions.add_ids(chunk + first_entry)
        positions.close()
        drawn = len(chosen)
        self.position += drawn
        distinct_entries, distinct_rows, max_repeats = draw_counts(self.connection, first_entry, chosen.counts(), rows)
        self.connection.execute(insert(MixtureDataset).values(
            mixture_id=self.mixture_id, dataset_id=dataset_id, seed=dataset_seed, size=spec.size,
            weight=spec.weight, base_entries=entries, requested=requested_count(entries, spec.size, spec.weight),
            entries=drawn, distinct_entries=distinct_entries, distinct_rows=distinct_rows,
            max_repeats=max_repeats,
        ))
        summary.datasets[name] = drawn

    def finish(self) -> MixtureSummary:
        self.summary.entries = self.position - self.start
        self.connection.execute(
            update(Mixture).where(Mixture.id == self.mixture_id).values(entries=self.summary.entries)
        )
        return self.summary


def write_mixture(connection: Connection, config: Config, name: str, *, seed: int, sampling: str) -> MixtureSummary:
    """Draw mixture ``name`` from the config's size/weight over a store's stored datasets."""
    query = select(Dataset.id, Dataset.name, Dataset.first_entry, Dataset.entries, Dataset.rows,
                   Dataset.rejected).order_by(Dataset.position)
    stored = {row.name: row for row in connection.execute(query)}
    missing = [spec.name for spec in config.datasets if spec.name not in stored]
    if missing:
        raise NotFoundError(
            f"{config.origin}: mixture '{name}': datasets not in the store: {', '.join(missing)} "
            f"(the store has: {', '.join(stored)})"
        )
    writer = MixtureWriter(connection, config, name, seed=seed, sampling=sampling)
    for spec in config.datasets:
        dataset = stored[spec.name]
        writer.add(dataset.id, dataset.name, dataset.first_entry, dataset.entries, dataset.rows - dataset.rejected)
    return writer.finish()


def add_mixture(
    store: str | os.PathLike[str], config: str | os.PathLike[str] | Config, name: str, *,
    seed: int = DEFAULT_SEED, sampling: str = "exact",
) -> MixtureSummary:
    """Add mixture ``name`` to an existing store from its base index alone (sources may be gone).

    Only the config's dataset names, ``size`` and ``weight`` are used; other mixtures are never
    touched. The store is rewritten on a copy and renamed into place.

    Example::

        add_mixture("demo.db", "data/demo_sft.yaml", "seed7", seed=7)
        DataEngine("demo.db", mixture="seed7")
    """
    config = config if isinstance(config, Config) else load_config(config, plugins=False)
    with rewriting(store) as connection:
        return write_mixture(connection, config, name, seed=seed, sampling=sampling)

"""Write a named mixture of a store's base index: per-dataset seeded draws, positions by rowid.

Only the stored base index is read (dataset ids, first entry, entry counts), never the sources,
so a mixture can be drawn again or added later with the source files gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from sqlalchemy import Connection, func, insert, select, update

from . import __version__
from .config import Config
from .errors import DataidxError
from .sampling import derive_seed, resample
from .schema import Dataset, Mixture, MixtureDataset, MixtureEntry

INSERT_BATCH = 50_000


@dataclass
class MixtureSummary:
    name: str
    seed: int
    sampling: str
    entries: int
    datasets: dict[str, int] = field(default_factory=dict)


def write_mixture(connection: Connection, config: Config, name: str, *, seed: int, sampling: str) -> MixtureSummary:
    """Draw mixture ``name`` from the config's size/weight and append it to the store."""
    stored = {row.name: row for row in connection.execute(select(Dataset.id, Dataset.name, Dataset.first_entry, Dataset.entries))}
    missing = [spec.name for spec in config.datasets if spec.name not in stored]
    if missing:
        raise DataidxError(f"mixture '{name}': datasets not in the store: {', '.join(missing)}")
    start = (connection.execute(select(func.max(MixtureEntry.id))).scalar() or 0) + 1
    mixture_id = connection.execute(
        insert(Mixture).values(
            name=name,
            seed=seed,
            sampling=sampling,
            start=start,
            entries=0,
            config_sha256=config.sha256,
            dataidx_version=__version__,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
    ).inserted_primary_key[0]
    summary = MixtureSummary(name=name, seed=seed, sampling=sampling, entries=0)
    position = start
    for spec in config.datasets:
        dataset = stored[spec.name]
        dataset_seed = derive_seed(seed, spec.name)
        base = range(dataset.first_entry, dataset.first_entry + dataset.entries)
        chosen = resample(base, spec.size, spec.weight, sampling, dataset_seed)
        for offset in range(0, len(chosen), INSERT_BATCH):
            connection.execute(
                insert(MixtureEntry),
                [
                    {"id": position + i, "mixture_id": mixture_id, "entry_id": entry_id}
                    for i, entry_id in enumerate(chosen[offset : offset + INSERT_BATCH], start=offset)
                ],
            )
        position += len(chosen)
        connection.execute(
            insert(MixtureDataset).values(
                mixture_id=mixture_id,
                dataset_id=dataset.id,
                seed=dataset_seed,
                size=spec.size,
                weight=spec.weight,
                base_entries=dataset.entries,
                entries=len(chosen),
            )
        )
        summary.datasets[spec.name] = len(chosen)
    summary.entries = position - start
    connection.execute(update(Mixture).where(Mixture.id == mixture_id).values(entries=summary.entries))
    return summary

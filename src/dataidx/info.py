"""What a store holds, as one JSON-able dict: build provenance, datasets and mixtures."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .schema import SCHEMA_REVISION, Build, Dataset, Mixture, MixtureDataset
from .store import readonly_engine


def store_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Provenance and counts of the store at ``path``; stable keys for ``--json``."""
    engine = readonly_engine(path)
    try:
        with Session(engine) as session:
            build = session.scalars(select(Build).order_by(Build.id.desc())).first()
            datasets = session.scalars(select(Dataset).order_by(Dataset.position)).all()
            names = {d.id: d.name for d in datasets}
            mixtures = []
            for mixture in session.scalars(select(Mixture).order_by(Mixture.id)):
                draws = session.scalars(
                    select(MixtureDataset).where(MixtureDataset.mixture_id == mixture.id).order_by(MixtureDataset.dataset_id)
                )
                mixtures.append(
                    {
                        "name": mixture.name,
                        "seed": mixture.seed,
                        "sampling": mixture.sampling,
                        "entries": mixture.entries,
                        "config_sha256": mixture.config_sha256,
                        "config_text": mixture.config_text,
                        "dataidx_version": mixture.dataidx_version,
                        "created_at": mixture.created_at,
                        "datasets": {
                            names[d.dataset_id]: {
                                "seed": d.seed,
                                "size": d.size,
                                "weight": d.weight,
                                "base_entries": d.base_entries,
                                "requested": d.requested,
                                "entries": d.entries,
                            }
                            for d in draws
                        },
                    }
                )
            return {
                "store": os.fspath(path),
                "schema_revision": SCHEMA_REVISION,
                "build": None
                if build is None
                else {
                    "created_at": build.created_at,
                    "config": build.config_origin,
                    "config_sha256": build.config_sha256,
                    "config_text": build.config_text,
                    "dataidx_version": build.dataidx_version,
                    "seconds": round(build.seconds, 3),
                },
                "datasets": [
                    {
                        "name": d.name,
                        "path": d.path,
                        "source": d.source,
                        "split": d.split,
                        "converter": d.converter,
                        "converter_version": d.converter_version,
                        "rows": d.rows,
                        "entries": d.entries,
                        "drops": d.drops,
                        "files": d.files,
                        "arrow_files": [f["path"] for f in d.arrow_files or []],
                    }
                    for d in datasets
                ],
                "mixtures": mixtures,
            }
    finally:
        engine.dispose()

"""What a store holds, as one JSON-able dict: build provenance, datasets, mixtures, render specs
and packing plans.

Read through a store handle on the plain DBAPI rather than the ORM: ``dataidx info`` should
answer in a fraction of a second, and importing SQLAlchemy alone costs a quarter of one.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .base.records import Datasets
from .connect import reading
from .handle import Store, StoreHandle
from .media.records import Media
from .mixtures.records import Mixtures
from .orders.records import Orders
from .plans.records import Plans
from .revisions import SCHEMA_REVISION
from .specs.records import Specs

#: Positions of a mixture whose entries train under a spec: what ``DataEngine(render=spec)``
#: serves. Runs are entry ranges, so both halves are range scans of ``entry_renders``.
_TRAINING_POSITIONS = (
    "SELECT (SELECT count(*) FROM mixture_runs AS run JOIN entry_renders AS r ON r.spec_id = {mark} "
    "AND r.entry_id BETWEEN run.first_entry AND run.first_entry + run.length - 1 "
    "WHERE run.mixture_id = {mark} AND r.status IN ({trains})) "
    "+ (SELECT count(*) FROM mixture_entries AS e JOIN entry_renders AS r ON r.spec_id = {mark} "
    "AND r.entry_id = e.entry_id WHERE e.mixture_id = {mark} AND r.status IN ({trains}))"
)


def _training_positions(handle: StoreHandle, mixture_id: int, spec_id: int) -> int:
    return handle.value(_TRAINING_POSITIONS, spec_id, mixture_id, spec_id, mixture_id)


def store_info(store: Store | StoreHandle) -> dict[str, Any]:
    """Provenance and counts of a store (a location, or an open handle); stable keys for ``--json``."""
    with reading(store) as handle:
        build = Datasets(handle).last_build()
        datasets = list(Datasets(handle).by_id().values())
        media = Media(handle).per_dataset()
        names = {d.id: d.name for d in datasets}
        mixtures = []
        stale = Mixtures(handle).stale()
        for mixture in handle.dicts("SELECT * FROM mixtures ORDER BY id"):
            draws = handle.dicts("SELECT * FROM mixture_datasets WHERE mixture_id = {mark} ORDER BY dataset_id",
                                 mixture["id"])
            mixtures.append({
                "id": mixture["id"],
                "name": mixture["name"],
                "seed": mixture["seed"],
                "sampling": mixture["sampling"],
                "entries": mixture["entries"],
                "config_sha256": mixture["config_sha256"],
                "config_text": mixture["config_text"],
                "dataidx_version": mixture["dataidx_version"],
                "created_at": mixture["created_at"],
                "spec": mixture["spec"],
                "stale": stale.get(mixture["name"]),
                # the evaluation rows: every other mixture leaves them out
                "held_out_rows": (Mixtures(handle).held_out_row_count() if mixture["name"] == Mixtures.HELD_OUT
                                  else None),
                "epochs": [entries for _, entries in Mixtures(handle).epochs_of(mixture["id"])],
                "skip_lists": [asdict(skips) for skips in Orders(handle).skip_lists(mixture["name"])],
                "datasets": {
                    names[d["dataset_id"]]: {
                        key: d[key] for key in ("seed", "size", "weight", "token_budget", "supervised_token_budget",
                                                "base_entries", "requested", "entries")
                    }
                    for d in draws
                },
            })
        specs = handle.dicts("SELECT id, name, fingerprint, tokenizer, template, cutoff, truncation, entries, kept, "
                             "dataidx_version, created_at, seconds, clock, escapes, trust_remote_code, media_proof "
                             "FROM render_specs ORDER BY id")
        for spec in specs:
            spec["trust_remote_code"] = bool(spec["trust_remote_code"])  # SQLite's 0/1, PostgreSQL's boolean
            spec["added_tokens"] = Specs(handle).added_token_uses(spec["id"])
            spec["causes"] = [cause._asdict() for cause in Specs(handle).causes(spec["name"])]
            spec["reasoning_problems"] = Specs(handle).reasoning_problems(spec["name"])
            stored = handle.dicts("SELECT file, folder, entries, tokens, word_bytes, bytes, bytes_per_token, sha256 "
                                  "FROM token_files WHERE spec = {mark}", spec["name"])
            spec["tokens"] = stored[0] if stored else None  # the spec's token file (render --store-tokens)
        for mixture in mixtures:  # what DataEngine(render=spec) serves of each
            mixture_id = mixture.pop("id")
            mixture["training_samples"] = {spec["name"]: _training_positions(handle, mixture_id, spec["id"])
                                           for spec in specs}
        plans = Plans(handle).info()
        shown = handle.name
    return {
        "store": str(shown),
        "schema_revision": SCHEMA_REVISION,
        "build": None if build is None else {
            "created_at": build["created_at"],
            "config": build["config_origin"],
            "config_sha256": build["config_sha256"],
            "config_text": build["config_text"],
            "dataidx_version": build["dataidx_version"],
            "seconds": round(build["seconds"], 3),
        },
        "datasets": [
            {
                **{key: getattr(d, key) for key in ("name", "path", "source", "split", "converter",
                                                    "converter_version", "rows", "entries", "drops", "rejected",
                                                    "on_error", "empty_rows")},
                "files": d.files,
                "arrow_files": [f["path"] for f in d.arrow_files or []],
                # distinct media files its rows name, and their bytes
                "media_files": media.get(d.id, (0, 0))[0],
                "media_bytes": media.get(d.id, (0, 0))[1],
            }
            for d in datasets
        ],
        "mixtures": mixtures,
        "render_specs": [{**{k: v for k, v in spec.items() if k != "id"}, "seconds": round(spec["seconds"], 3)}
                         for spec in specs],
        "pack_plans": plans,
    }

"""What a store holds, as one JSON-able dict: build provenance, datasets, mixtures, render specs
and packing plans.

Read through a store handle on the plain DBAPI rather than the ORM: ``dataidx info`` should
answer in a fraction of a second, and importing SQLAlchemy alone costs a quarter of one.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .base.records import Datasets
from .causes import render_causes
from .connect import reading
from .handle import Store, StoreHandle
from .orders.records import Orders
from .records import REASONING_PROBLEMS, read_epochs, stale_budget_mixtures
from .revisions import SCHEMA_REVISION

#: Positions of a mixture whose entries train under a spec: what ``DataEngine(render=spec)``
#: serves. Runs are entry ranges, so both halves are range scans of ``entry_renders``.
_TRAINING_POSITIONS = (
    "SELECT (SELECT count(*) FROM mixture_runs AS run JOIN entry_renders AS r ON r.spec_id = {mark} "
    "AND r.entry_id BETWEEN run.first_entry AND run.first_entry + run.length - 1 "
    "WHERE run.mixture_id = {mark} AND r.status IN ({trains})) "
    "+ (SELECT count(*) FROM mixture_entries AS e JOIN entry_renders AS r ON r.spec_id = {mark} "
    "AND r.entry_id = e.entry_id WHERE e.mixture_id = {mark} AND r.status IN ({trains}))"
)


#: Per dataset of a spec, the entries whose data text holds a plain (not special) added token.
_ADDED_TOKENS = (
    "SELECT d.name AS dataset, u.token, u.entries FROM added_token_uses AS u JOIN datasets AS d ON d.id = u.dataset_id "
    "WHERE u.spec_id = {mark} ORDER BY d.position, u.entries DESC, u.token"
)


#: What each reasoning problem means, for ``dataidx info`` and the report: ``(what, why)``.
REASONING_SAID = {
    "dropped": ("reasoning dropped from the trained tokens", "the template does not write it"),
    "unclosed": ("reasoning unclosed", "the trained turn opens <think> and never closes it"),
    "no_answer": ("reasoning without an answer", "nothing follows the reasoning: no text, no tool call"),
    "mode_mismatch": ("reasoning against the thinking switch",
                      "the user asked /no_think and the turn reasons, or /think and it does not"),
}

def added_token_uses(handle: StoreHandle, spec_id: int) -> list[dict[str, Any]]:
    """``{dataset, token, entries}`` of spec ``spec_id``: per dataset, the base entries whose data
    text holds an added token that is not special (kept as its id, as in v1), most first."""
    return handle.dicts(_ADDED_TOKENS, spec_id)


def reasoning_problems(handle: StoreHandle, spec: str) -> list[dict[str, Any]]:
    """``{status, entries, dataset, row, cut}`` of spec ``spec``: per reasoning problem that
    occurs, its base entries and the first of them, worst problem first (counted when rendered)."""
    found: list[dict[str, Any]] = [
        {"status": row.cause, "entries": row.entries, "dataset": row.dataset, "row": row.row, "cut": row.cut}
        for row in render_causes(handle, spec, "reasoning") if row.cause in REASONING_PROBLEMS]
    return sorted(found, key=lambda problem: REASONING_PROBLEMS.index(problem["status"]))


def _training_positions(handle: StoreHandle, mixture_id: int, spec_id: int) -> int:
    return handle.value(_TRAINING_POSITIONS, spec_id, mixture_id, spec_id, mixture_id)


def store_info(store: Store | StoreHandle) -> dict[str, Any]:
    """Provenance and counts of a store (a location, or an open handle); stable keys for ``--json``."""
    with reading(store) as handle:
        build = Datasets(handle).last_build()
        datasets = list(Datasets(handle).by_id().values())
        names = {d.id: d.name for d in datasets}
        mixtures = []
        stale = stale_budget_mixtures(handle, store=handle.name)
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
                "epochs": [entries for _, entries in read_epochs(handle, mixture["id"])],
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
                             "dataidx_version, created_at, seconds, clock, escapes FROM render_specs ORDER BY id")
        for spec in specs:
            spec["added_tokens"] = added_token_uses(handle, spec["id"])
            spec["causes"] = [cause._asdict() for cause in render_causes(handle, spec["name"])]
            spec["reasoning_problems"] = reasoning_problems(handle, spec["name"])
            stored = handle.dicts("SELECT file, folder, entries, tokens, word_bytes, bytes, bytes_per_token, sha256 "
                                  "FROM token_files WHERE spec = {mark}", spec["name"])
            spec["tokens"] = stored[0] if stored else None  # the spec's token file (render --store-tokens)
        for mixture in mixtures:  # what DataEngine(render=spec) serves of each
            mixture_id = mixture.pop("id")
            mixture["training_samples"] = {spec["name"]: _training_positions(handle, mixture_id, spec["id"])
                                           for spec in specs}
        plans = handle.dicts("SELECT plan, spec, mixture, capacity, seed, packs, entries, fill, tokens, left_out "
                             "FROM pack_plans ORDER BY plan")
        for plan in plans:  # steps per epoch follow the packs of each epoch, not their sum
            plan["epoch_packs"] = [packs for (packs,) in handle.all(
                "SELECT e.packs FROM plan_epochs AS e JOIN packing_plans AS p ON p.id = e.plan_id "
                "WHERE p.name = {mark} ORDER BY e.epoch", plan["plan"])]
            plan["merge_cuts"] = handle.value("SELECT merge_cuts FROM packing_plans WHERE name = {mark}", plan["plan"])
            plan["merges"] = cut_merges(handle, plan["plan"])
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
            }
            for d in datasets
        ],
        "mixtures": mixtures,
        "render_specs": [{**{k: v for k, v in spec.items() if k != "id"}, "seconds": round(spec["seconds"], 3)}
                         for spec in specs],
        "pack_plans": plans,
    }


def cut_merges(handle: StoreHandle, plan: str) -> list[dict[str, Any]]:
    """Per outcome of a plan's ``--merge-cuts`` (merged, tree, or why conversations stayed cuts),
    over its epochs: rows, entries, tokens as cuts and tokens forwarded; [] for a plan without it."""
    return handle.dicts("SELECT outcome, CAST(sum(rows) AS bigint) AS rows, CAST(sum(entries) AS bigint) AS entries, "
                        "CAST(sum(cut_tokens) AS bigint) AS cut_tokens, CAST(sum(tokens) AS bigint) AS tokens "
                        "FROM cut_merges WHERE plan = {mark} GROUP BY outcome "
                        "ORDER BY min(CASE outcome WHEN 'merged' THEN 0 WHEN 'tree' THEN 1 ELSE 2 END), outcome", plan)


def merging_plans(store: Store, *, mixture: str, spec: str) -> list[dict[str, Any]]:
    """The plans of ``mixture`` under ``spec`` made with ``--merge-cuts``: ``plan``, ``merge_cuts``
    and ``merges`` (as :func:`cut_merges`), for ``dataidx compose --spec``."""
    with reading(store) as handle:
        plans = handle.dicts("SELECT p.name AS plan, p.merge_cuts FROM packing_plans AS p "
                             "JOIN mixtures AS m ON m.id = p.mixture_id JOIN render_specs AS s ON s.id = p.spec_id "
                             "WHERE m.name = {mark} AND s.name = {mark} AND p.merge_cuts <> 'no' ORDER BY p.name",
                             mixture, spec)
        for plan in plans:
            plan["merges"] = cut_merges(handle, plan["plan"])
    return plans

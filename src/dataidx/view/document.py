"""The report's figures as one JSON-able document (``dataidx report --json``): the numbers the
page draws, with stable keys, so a script or a test can hold the page to SQL."""

from __future__ import annotations

from typing import Any

from ..render import cause_advice, describe_cause
from .figures import Figures
from .media_figures import media_document
from .reasoning import reasoning_document


def _rows(keys: tuple[str, ...], rows: list[tuple]) -> list[dict[str, Any]]:
    return [dict(zip(keys, row)) for row in rows]


def report_document(figures: Figures, samples: list[tuple[int, int]]) -> dict[str, Any]:
    """Every figure of the report; ``samples`` are the ``(epoch, position)`` pairs it shows."""
    mixture, spec, plan = figures.mixture, figures.spec, figures.plan
    return {
        "store": figures.info["store"],
        "mixture": mixture["name"],
        "epoch": figures.epoch,
        "epochs": len(figures.epochs),
        "positions": figures.positions,
        "summary": summary_facts(figures),
        "draws": [{"dataset": name, **draw} for name, draw in mixture["datasets"].items()],
        "epoch_draws": _rows(("epoch", "dataset", "seed", "entries", "distinct_rows", "training_entries", "tokens",
                              "supervised_tokens"), figures.epoch_draws),
        "epoch_seeds": _rows(("epoch", "seed", "entries"), figures.epochs),
        "composition": figures.composition,
        "turns": _rows(("dataset", "turns", "rows"), figures.turns),
        "spec": None if spec is None else {
            "name": spec.name,
            "cutoff": spec.cutoff,
            "bin_width": spec.bin_width,
            "lengths": _rows(("dataset", "status", "bin", "positions"), spec.histogram),
            "supervised": _rows(("dataset", "positions", "tokens", "supervised_tokens"), spec.supervised),
            "by_epoch": _rows(("epoch", "dataset", "positions", "training_positions", "tokens", "supervised_tokens"),
                              spec.by_epoch),
            "not_training": {
                "positions": spec.not_training_positions,
                "entries": spec.not_training_entries,
                "reasons": _rows(("dataset", "status", "positions", "example"), spec.reasons),
                "most_drawn": _rows(("dataset", "row", "cut", "status", "full_tokens", "detail", "drawn"),
                                    spec.not_training),
            },
            "added_tokens": _rows(("dataset", "token", "entries"), spec.added_tokens),
            "causes": [{"cause": cause, "words": describe_cause(cause).words, "advice": cause_advice(cause),
                        "entries": entries, "example": {"dataset": dataset, "row": row, "cut": cut, "detail": detail}}
                       for cause, entries, dataset, row, cut, detail in spec.causes],
            "reasoning": reasoning_document(spec.reasoning),
            "media": media_document(spec.media),
        },
        "plan": None if plan is None else {
            "name": plan.name, "capacity": plan.capacity, "packs": plan.packs, "entries": plan.entries,
            "tokens": plan.tokens, "fill": round(plan.fill, 6), "left_out": plan.left_out,
            "fill_histogram": _rows(("bin", "packs"), plan.fill_histogram),
            "epochs": _rows(("epoch", "seed", "packs", "entries", "tokens", "fill", "left_out"), plan.epochs),
            "topology": None if plan.topology is None else dict(zip(("world_size", "micro_batches", "balance"),
                                                                    plan.topology)),
            "balance": _rows(("epoch", "step", "imbalance"), plan.balance),
        },
        "rejects": {"counts": _rows(("dataset", "rows"), figures.reject_counts),
                    "listed": _rows(("dataset", "row", "reason"), figures.rejects)},
        "evidence": [{"name": one.run.name, "kind": one.run.kind, "entries": one.run.entries, "params": one.run.params,
                      "datasets": _rows(("dataset", "rows", "entries"), one.counts)} for one in figures.evidence],
        "exact_duplicates": _rows(("dataset", "copies", "same_prompts"), figures.exact.counts) if figures.exact
        else [],
        "samples": [{"epoch": epoch, "position": position} for epoch, position in samples],
    }


def summary_facts(figures: Figures) -> dict[str, Any]:
    """What the Summary table says: the store's build, and the mixture and the config that drew it."""
    build, mixture = figures.info["build"] or {}, figures.mixture
    from_build = build.get("config_sha256") == mixture["config_sha256"]
    return {
        "built": build.get("created_at"),
        "build config": build.get("config"),
        "build seconds": build.get("seconds"),
        "dataidx (build)": build.get("dataidx_version"),
        "mixture": mixture["name"],
        "drawn by": "dataidx build, from the build config" if from_build else "dataidx mix, from a config of its own",
        "mixture config": (build.get("config") if from_build else
                           _first_line(mixture["config_text"]) or "(the store keeps its text, not its path)"),
        "mixture config sha256": mixture["config_sha256"],
        "mixture drawn at": mixture["created_at"],
        "dataidx (mixture)": mixture["dataidx_version"],
        "mixture seed": str(mixture["seed"]),
        "sampling": mixture["sampling"],
        "budgets counted under spec": mixture["spec"],
        "epochs": len(figures.epochs),
        "entries (all epochs)": mixture["entries"],
        "figures over": "every epoch" if figures.epoch is None else f"epoch {figures.epoch}",
        "positions counted": figures.positions,
    }


def _first_line(text: str) -> str:
    """The config's first comment line: what its author said it is."""
    for line in text.splitlines():
        if line.strip():
            return line.strip() if line.lstrip().startswith("#") else ""
    return ""

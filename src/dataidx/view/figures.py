"""The report's figures, each one SQL aggregate over the store: nothing is read row by row into
Python, so a report of millions of entries takes seconds and flat memory.

Length histograms, supervised tokens and reasons count a spec's *base* entries (what each
dataset holds); the mixture's share and repeats come from :func:`composition`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store import TRAINS, ReadConnection, composition, not_found, store_info

#: Bars per length histogram, and fill bins of a packing plan (of 5% each).
LENGTH_BINS = 40
FILL_BINS = 20
#: Entries that will not train, listed one by one (the counts cover them all).
LISTED = 50

Progress = Callable[[int, int], None]


@dataclass
class SpecFigures:
    """A render spec's lengths: ``histogram`` rows are ``(dataset, status, bin, entries)`` of
    ``full_tokens // bin_width``; ``supervised`` rows ``(dataset, entries, tokens, supervised)``
    of the entries that train; ``reasons`` ``(dataset, status, entries, example detail)``."""

    name: str
    cutoff: int
    bin_width: int
    histogram: list[tuple[str, str, int, int]]
    supervised: list[tuple[str, int, int, int]]
    reasons: list[tuple[str, str, int, str | None]]
    not_training: list[tuple[str, int, int | None, str, int, str | None]]


@dataclass
class PlanFigures:
    """A packing plan: its row of ``pack_plans`` and ``fill`` rows ``(bin, packs)`` by 5% of fill."""

    name: str
    capacity: int
    packs: int
    entries: int
    tokens: int
    fill: float
    fill_histogram: list[tuple[int, int]]


@dataclass
class Figures:
    """Everything the report shows, gathered by :func:`gather`."""

    info: dict[str, Any]
    mixture: dict[str, Any]
    composition: list[dict[str, Any]]
    turns: list[tuple[str, int, int]]
    rejects: list[tuple[str, int, str]]
    reject_counts: list[tuple[str, int]]
    spec: SpecFigures | None = None
    plan: PlanFigures | None = None
    steps: list[str] = field(default_factory=list)


def _all(connection: ReadConnection, sql: str, *parameters: Any, **fragments: str) -> list[tuple]:
    return [tuple(row) for row in connection.execute(connection.dialect.sql(sql, **fragments), parameters).fetchall()]


def gather(path: str, connection: ReadConnection, mixture: str, spec: str | None, plan: str | None,
           progress: Progress | None = None) -> Figures:
    """The figures of ``mixture`` (and of ``spec`` and ``plan`` when named) in the store at ``path``."""
    steps = 4 + (spec is not None) + (plan is not None)
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, steps)

    info = store_info(path)
    chosen = next((m for m in info["mixtures"] if m["name"] == mixture), None)
    if chosen is None:
        raise not_found(connection, "mixtures", "mixture", mixture, path)
    step()
    figures = Figures(info, chosen, composition(path, mixture), [], [], [])
    step()
    figures.turns = _all(connection, "SELECT d.name, t.turns, count(*) FROM (SELECT dataset_id, row, count(*) AS turns "
                                     "FROM base_entries GROUP BY dataset_id, row) AS t JOIN datasets AS d "
                                     "ON d.id = t.dataset_id GROUP BY d.position, d.name, t.turns ORDER BY d.position, t.turns")
    step()
    figures.reject_counts = _all(connection, "SELECT dataset, count(*) FROM rejects GROUP BY dataset ORDER BY dataset")
    figures.rejects = _all(connection, f"SELECT dataset, row, reason FROM rejects ORDER BY dataset, row LIMIT {LISTED}")
    step()
    if spec is not None:
        figures.spec = _spec_figures(connection, path, spec)
        step()
    if plan is not None:
        figures.plan = _plan_figures(connection, path, plan)
        step()
    return figures


def _spec_figures(connection: ReadConnection, path: str, name: str) -> SpecFigures:
    found = _all(connection, "SELECT id, cutoff FROM render_specs WHERE name = {mark}", name)
    if not found:
        raise not_found(connection, "render_specs", "render spec", name, path, "; run dataidx render")
    (spec_id, cutoff), = found
    longest = _all(connection, "SELECT max(full_tokens) FROM entry_renders WHERE spec_id = {mark}", spec_id)[0][0] or 0
    width = max(1, math.ceil((longest + 1) / LENGTH_BINS))
    joined = "entry_renders AS r JOIN base_entries AS b ON b.id = r.entry_id JOIN datasets AS d ON d.id = b.dataset_id"
    trains = ", ".join(f"'{status}'" for status in TRAINS)
    # One pass over the spec's rows; the per-dataset figures are sums of its few groups.
    groups = _all(connection, "SELECT d.name, r.status, r.full_tokens / {width} AS bin, count(*), sum(r.tokens), "
                              "sum(r.supervised_tokens), min(r.detail) FROM {joined} WHERE r.spec_id = {mark} "
                              "GROUP BY d.position, d.name, r.status, bin ORDER BY d.position, r.status, bin",
                  spec_id, width=str(width), joined=joined)
    supervised: dict[str, list[int]] = {}
    reasons: dict[tuple[str, str], list] = {}
    for dataset, status, _, entries, tokens, supervised_tokens, detail in groups:
        if status in TRAINS:
            totals = supervised.setdefault(dataset, [0, 0, 0])
            totals[0], totals[1], totals[2] = totals[0] + entries, totals[1] + tokens, totals[2] + supervised_tokens
        else:
            reason = reasons.setdefault((dataset, status), [0, detail])
            reason[0] += entries
            reason[1] = min(filter(None, (reason[1], detail)), default=None)
    return SpecFigures(
        name, cutoff, width,
        histogram=[(dataset, status, bin_number, entries) for dataset, status, bin_number, entries, *_ in groups],
        supervised=[(dataset, *totals) for dataset, totals in supervised.items()],
        reasons=[(dataset, status, entries, detail) for (dataset, status), (entries, detail) in reasons.items()],
        not_training=_all(connection, "SELECT d.name, b.row, b.cut, r.status, r.full_tokens, r.detail FROM {joined} "
                                      "WHERE r.spec_id = {mark} AND r.status NOT IN ({trains}) ORDER BY r.entry_id "
                                      f"LIMIT {LISTED}", spec_id, joined=joined, trains=trains),
    )


def _plan_figures(connection: ReadConnection, path: str, name: str) -> PlanFigures:
    found = _all(connection, "SELECT p.id, p.capacity, p.packs, p.entries, p.tokens, p.fill "
                             "FROM packing_plans AS p WHERE p.name = {mark}", name)
    if not found:
        raise not_found(connection, "packing_plans", "packing plan", name, path, "; run dataidx pack")
    (plan_id, capacity, packs, entries, tokens, fill), = found
    # Each pack's tokens were stored with it by dataidx pack.
    bin_of = "CASE WHEN k.tokens * {bins} / {capacity} >= {bins} THEN {last} ELSE k.tokens * {bins} / {capacity} END"
    histogram = _all(connection, "SELECT " + bin_of + " AS bin, count(*) FROM packs AS k WHERE k.plan_id = {mark} "
                     "GROUP BY bin ORDER BY bin", plan_id,
                     bins=str(FILL_BINS), capacity=str(capacity), last=str(FILL_BINS - 1))
    return PlanFigures(name, capacity, packs, entries, tokens, fill, histogram)


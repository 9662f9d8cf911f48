"""The report's figures, each one SQL aggregate over the store: nothing is read row by row into
Python, so a report of millions of entries takes seconds and flat memory.

Every figure is over the mixture's positions (:mod:`.positions`): all its epochs, or the one
``--epoch`` names, with a breakdown by epoch. A dataset's share and repeats come from
:func:`composition`; what each epoch drew and against which budgets from :class:`Mixtures`;
lengths and tokens under a spec from :mod:`.spec_figures`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreError, UsageError
from ..progress import CountProgress
from ..store import Mixtures, Plans, StoreHandle, composition, store_info
from .positions import Selection
from .spec_figures import SpecFigures, spec_figures

#: Fill bins of a packing plan (of 5% each).
FILL_BINS = 20
#: Rejected rows listed one by one (the counts cover them all).
LISTED = 50


@dataclass(frozen=True, kw_only=True)
class PlanFigures:
    """A packing plan of the mixture over the chosen epochs: totals, ``fill`` rows ``(bin, packs)``
    by 5% of fill, and ``epochs`` rows ``(epoch, seed, packs, entries, tokens, fill, left_out)``."""

    name: str
    capacity: int
    packs: int
    entries: int
    tokens: int
    fill: float
    left_out: int
    fill_histogram: list[tuple[int, int]]
    epochs: list[tuple[int, int, int, int, int, float, int]]
    #: ``no``, ``chains`` or ``trees``; with merging, rows ``(outcome, conversations, entries, cut tokens, tokens)``
    merge_cuts: str = "no"
    merges: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    #: a plan for a topology: ``(world_size, micro_batches, balance)``, and per whole global step
    #: ``(epoch, step, imbalance)`` (its costliest rank over the mean, view ``plan_balance``)
    topology: tuple[int, int, str] | None = None
    balance: list[tuple[int, int, float]] = field(default_factory=list)


@dataclass(kw_only=True)
class Figures:
    """Everything the report shows, gathered by :func:`gather`. ``epochs`` rows are
    ``(epoch, seed, entries)``; ``epoch_draws`` rows ``(epoch, dataset, seed, entries,
    distinct_rows, training_entries, tokens, supervised_tokens)`` (tokens only for a mixture
    drawn under a spec)."""

    info: dict[str, Any]
    mixture: dict[str, Any]
    selection: Selection
    epochs: list[tuple[int, int, int]]
    composition: list[dict[str, Any]]
    epoch_draws: list[tuple]
    turns: list[tuple[str, int, int]] = field(default_factory=list)
    rejects: list[tuple[str, int, str]] = field(default_factory=list)
    reject_counts: list[tuple[str, int]] = field(default_factory=list)
    spec: SpecFigures | None = None
    plan: PlanFigures | None = None
    #: the store's evidence lists (``view/evidence.py``: a ListFigures each), read beside the figures
    evidence: list[Any] = field(default_factory=list)
    #: the exact duplicates the build found (``view/evidence.py``: an ExactFigures), or None
    exact: Any = None

    @property
    def epoch(self) -> int | None:
        return self.selection.epoch

    @property
    def positions(self) -> int:
        """Positions the figures count: the chosen epochs' entries."""
        return sum(entries for epoch, _, entries in self.epochs
                   if self.selection.first <= epoch <= self.selection.last)


def gather(handle: StoreHandle, mixture: str, *, spec: str | None, plan: str | None,
           epoch: int | None = None, progress: CountProgress | None = None) -> Figures:
    """The figures of ``mixture`` (of epoch ``epoch``, or of all), and of ``spec`` and ``plan``
    when named, read through ``handle``."""
    steps = 4 + (spec is not None) + (plan is not None)
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, steps)

    mixtures = Mixtures(handle)
    found = mixtures.get(mixture, 0 if epoch is None else epoch)  # or a NotFoundError
    info = store_info(handle)
    chosen = next(m for m in info["mixtures"] if m["name"] == mixture)
    plan_row = _plan_row(handle, plan, mixture) if plan is not None else None
    first, last = (0, found.epochs - 1) if epoch is None else (epoch, epoch)
    selection = Selection(mixture_id=found.id, first=first, last=last, epoch=epoch)
    step()
    epochs = mixtures.epoch_rows(found.id)
    draws = mixtures.epoch_draws(found.id, selection.first, selection.last)
    figures = Figures(info=info, mixture=chosen, selection=selection, epochs=epochs,
                      composition=composition(handle, mixture, epoch=epoch), epoch_draws=draws)
    step()
    figures.turns = selection.figures(handle).turns()
    step()
    figures.reject_counts = handle.all("SELECT dataset, count(*) FROM rejects GROUP BY dataset ORDER BY dataset")
    figures.rejects = handle.all("SELECT dataset, row, reason FROM rejects ORDER BY dataset, row LIMIT {mark}", LISTED)
    step()
    if spec is not None:
        figures.spec = spec_figures(handle, spec, selection, [d["name"] for d in info["datasets"]])
        step()
    if plan_row is not None:
        figures.plan = _plan_figures(handle, plan_row, selection)
        step()
    return figures


def _plan_row(handle: StoreHandle, name: str, mixture: str) -> tuple[int, str, int, str, str]:
    """``(id, name, capacity, mixture, merge_cuts)`` of plan ``name``, refused unless it packs ``mixture``."""
    found = Plans(handle).find(name)
    capacity = found.capacity
    if type(capacity) is not int or not 0 < capacity < 2**31:  # a store's value, read as data, never as SQL
        raise StoreError(f"{handle.name}: packing plan '{name}' has capacity {capacity!r}, not a count of tokens: "
                         "the store is damaged or was not made by dataidx")
    if found.mixture != mixture:
        raise UsageError(f"packing plan '{name}' packs mixture '{found.mixture}', not '{mixture}': "
                         f"pass --mixture {found.mixture}, or a plan of mixture '{mixture}'")
    return found.id, name, capacity, found.mixture, found.merge_cuts


def _plan_figures(handle: StoreHandle, row: tuple[int, str, int, str, str], selection: Selection) -> PlanFigures:
    plan_id, name, capacity, _, merge_cuts = row
    plans = Plans(handle)
    stored = plans.epochs(plan_id, selection.first, selection.last)
    if not stored:
        raise UsageError(f"packing plan '{name}' has no epoch {selection.first}")
    epochs = [(e.epoch, e.seed, e.packs, e.entries, e.tokens, e.fill, e.left_out) for e in stored]
    # Each pack's tokens were stored with it by dataidx pack; an epoch's packs are one stretch.
    first_pack = min(e.first_pack for e in stored)
    packs = sum(e.packs for e in stored)
    histogram = plans.fill_histogram(plan_id, first_pack, first_pack + packs - 1, capacity, FILL_BINS)
    tokens = sum(e.tokens for e in stored)
    merges = plans.merges(name, selection.first, selection.last)
    found = plans.find(name)
    topology = (None if found.world_size is None or found.micro_batches is None
                else (found.world_size, found.micro_batches, found.balance))
    return PlanFigures(topology=topology,
                       balance=plans.balance_steps(name, selection.first, selection.last) if topology else [],
                       name=name, capacity=capacity, packs=packs, entries=sum(e.entries for e in stored), tokens=tokens,
                       fill=tokens / (packs * capacity) if packs else 0.0, left_out=sum(e.left_out for e in stored),
                       fill_histogram=histogram, epochs=epochs, merge_cuts=str(merge_cuts),
                       merges=[(str(m["outcome"]), int(m["rows"]), int(m["entries"]), int(m["cut_tokens"]),
                                int(m["tokens"])) for m in merges])

"""A render spec's figures over a mixture's positions: lengths by status, what trains, and why
the rest does not. A position counts once each time it is drawn; so do its tokens."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from ..store import Specs, StoreHandle
from .media_figures import MediaRow, media_rows
from .positions import Selection
from .reasoning import reasoning_rows

#: Bars per length histogram; distinct entries that do not train listed one by one (most drawn first).
LENGTH_BINS = 40
LISTED = 20


@dataclass(frozen=True, kw_only=True)
class SpecFigures:
    """A render spec over the chosen positions. ``histogram`` rows are ``(dataset, status, bin,
    positions)`` of ``full_tokens // bin_width``; ``supervised`` rows ``(dataset, positions,
    tokens, supervised_tokens)`` of the positions that train; ``by_epoch`` rows ``(epoch, dataset,
    positions, training, tokens, supervised_tokens)``; ``reasons`` rows ``(dataset, status,
    positions, example detail)``; ``not_training`` the :data:`LISTED` entries drawn most often
    that do not train, ``(dataset, row, cut, status, full_tokens, detail, times drawn)``, of
    ``not_training_entries`` distinct ones; ``added_tokens`` rows ``(dataset, token, entries)``
    count base entries (not positions) whose data text holds an added token that is not special;
    ``reasoning`` rows are :func:`.reasoning.reasoning_rows`."""

    name: str
    cutoff: int
    bin_width: int
    histogram: list[tuple[str, str, int, int]]
    supervised: list[tuple[str, int, int, int]]
    by_epoch: list[tuple[int, str, int, int, int, int]]
    reasons: list[tuple[str, str, int, str | None]]
    not_training: list[tuple[str, int, int | None, str, int, str | None, int]]
    not_training_entries: int
    added_tokens: list[tuple[str, str, int]]
    #: why base entries (not positions) of the spec do not train, per cause (see dataidx.render.causes)
    causes: list[Specs.CauseRow]
    reasoning: list[tuple]
    #: per dataset, its media under a processor's spec (:mod:`.media_figures`); None for a text spec
    media: list[MediaRow] | None = None

    @property
    def not_training_positions(self) -> int:
        return sum(reason[2] for reason in self.reasons)


def spec_figures(handle: StoreHandle, name: str, selection: Selection, datasets: list[str]) -> SpecFigures:
    """The figures of spec ``name`` over the selection; ``datasets`` in the store's order, for its media rows."""
    found = Specs(handle).get(name)
    spec_id, cutoff = found["id"], found["cutoff"]
    drawn = selection.figures(handle)
    width = max(1, math.ceil((drawn.longest(spec_id) + 1) / LENGTH_BINS))
    # One pass over the positions; every figure is a sum of its few groups.
    groups = drawn.length_groups(spec_id, width)
    histogram: dict[tuple[str, str, int], int] = defaultdict(int)
    supervised: dict[str, list[int]] = {}
    by_epoch: dict[tuple[int, str], list[int]] = {}
    reasons: dict[tuple[str, str], list] = {}
    for epoch, dataset, status, bin_number, positions, tokens, supervised_tokens, detail in groups:
        histogram[dataset, status, bin_number] += positions
        epoch_row = by_epoch.setdefault((epoch, dataset), [0, 0, 0, 0])
        epoch_row[0] += positions
        if status in Specs.TRAINING_STATUSES:
            totals = supervised.setdefault(dataset, [0, 0, 0])
            totals[0], totals[1], totals[2] = totals[0] + positions, totals[1] + tokens, totals[2] + supervised_tokens
            epoch_row[1:] = [epoch_row[1] + positions, epoch_row[2] + tokens, epoch_row[3] + supervised_tokens]
        else:
            reason = reasons.setdefault((dataset, status), [0, detail])
            reason[0] += positions
            reason[1] = min(filter(None, (reason[1], detail)), default=None)
    return SpecFigures(
        name=name, cutoff=cutoff, bin_width=width,
        histogram=[(dataset, status, bin_number, n) for (dataset, status, bin_number), n in histogram.items()],
        supervised=[(dataset, positions, tokens, supervised_tokens)
                    for dataset, (positions, tokens, supervised_tokens) in supervised.items()],
        by_epoch=[(epoch, dataset, positions, trains, tokens, supervised_tokens)
                  for (epoch, dataset), (positions, trains, tokens, supervised_tokens) in by_epoch.items()],
        reasons=[(dataset, status, n, detail) for (dataset, status), (n, detail) in reasons.items()],
        not_training=drawn.not_training(spec_id, LISTED),
        not_training_entries=drawn.not_training_count(spec_id),
        added_tokens=[(u["dataset"], u["token"], u["entries"]) for u in Specs(handle).added_token_uses(spec_id)],
        causes=Specs(handle).causes(name),
        reasoning=reasoning_rows(handle, selection, spec_id),
        media=media_rows(handle, found, datasets),
    )

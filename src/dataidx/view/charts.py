"""The report's charts, drawn by matplotlib as inline SVG.

Why matplotlib and not Vega-Lite: a static SVG needs no JavaScript runtime inlined into the
page (Vega's is ~1 MB), opens in any browser or mail client, and draws the same bytes every
time. Every mark (a bar) carries an SVG id ``mark-<chart>-<n>``, so a test in a real browser can
count what each chart drew against the SQL figures.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import matplotlib
import matplotlib.axis
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..store import Specs
from .figures import FILL_BINS, PlanFigures
from .spec_figures import SpecFigures

#: A colour per status, good to bad; colour-blind safe (Okabe-Ito).
STATUS_COLOURS = dict(zip(Specs.STATUSES, ("#009E73", "#E69F00", "#D55E00", "#999999", "#CC79A7")))
_BAR = "#0072B2"
#: Media (image placeholder) tokens and text tokens, in the media chart.
_MEDIA, _TEXT = "#CC79A7", "#56B4E9"


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=96, layout="constrained")


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "dataidx", "font.size": 9}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # the inline element, without the XML prolog and doctype


def _label(text: str) -> str:
    """Data as a label: matplotlib would read ``$...$`` in a dataset name as mathematics."""
    return text.replace("$", r"\$")


def _empty(message: str) -> str:
    figure = _figure(7, 0.6)
    figure.text(0.01, 0.5, message, va="center")
    return _svg(figure)


def horizontal_bars(chart: str, labels: list[str], values: list[float], xlabel: str) -> str:
    """One bar per label (the :data:`BARS` largest); bar ``i`` has the id ``mark-<chart>-<i>``."""
    kept, hidden = _top(dict(zip(labels, values)), lambda value: value, BARS)
    labels, values = list(kept), list(kept.values())
    figure = _figure(7, 0.45 * len(labels) + 1)
    _left_out(figure, hidden)
    axes = figure.add_subplot()
    bars = axes.barh(range(len(labels)), values, color=_BAR)
    for number, (bar, value) in enumerate(zip(bars, values)):
        bar.set_gid(f"mark-{chart}-{number}")
        axes.annotate(f"{value:,}" if isinstance(value, int) else f"{value:.1%}", (value, number),
                      xytext=(3, 0), textcoords="offset points", va="center")
    axes.set_yticks(range(len(labels)), [_label(label) for label in labels])
    axes.invert_yaxis()
    if all(isinstance(value, int) for value in values):
        _counts(axes.xaxis)
    axes.set_xlabel(xlabel)
    axes.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def media_chart(labels: list[str], tokens: list[tuple[int, int]]) -> str:
    """Per dataset (the :data:`BARS` with most tokens), one bar of its training tokens split into
    media and text; marks ``mark-media-<2i>`` (media) and ``mark-media-<2i+1>`` (text)."""
    kept, hidden = _top(dict(zip(labels, tokens)), sum, BARS)
    figure = _figure(7, 0.45 * len(kept) + 1.2)
    _left_out(figure, hidden)
    axes = figure.add_subplot()
    for number, (media, text) in enumerate(kept.values()):
        shown, = axes.barh(number, media, color=_MEDIA, label="media tokens" if number == 0 else None)
        rest, = axes.barh(number, text, left=media, color=_TEXT, label="text tokens" if number == 0 else None)
        shown.set_gid(f"mark-media-{2 * number}")
        rest.set_gid(f"mark-media-{2 * number + 1}")
        share = media / (media + text) if media + text else 0.0
        axes.annotate(f"{share:.1%} media", (media + text, number), xytext=(3, 0), textcoords="offset points",
                      va="center")
    axes.set_yticks(range(len(kept)), [_label(label) for label in kept])
    axes.invert_yaxis()
    _counts(axes.xaxis)
    axes.set_xlabel("tokens of the entries that train")
    axes.legend(loc="lower right", fontsize=8, frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def _counts(axis: matplotlib.axis.Axis) -> None:
    """A count axis: integer ticks only."""
    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


#: Datasets drawn as panels of their own; the rest are named below the chart (their figures are in
#: the tables), so a mixture of hundreds of datasets draws as fast as one of a dozen.
PANELS = 12


#: Bars of a bar chart with one per dataset.
BARS = 30


def _top(groups: dict[str, Any], weight: Callable[[Any], float], most: int = PANELS) -> tuple[dict[str, Any], int]:
    """The ``most`` groups of largest ``weight``, in their order, and how many were left out."""
    if len(groups) <= most:
        return groups, 0
    kept = set(sorted(groups, key=lambda name: -weight(groups[name]))[:most])
    return {name: value for name, value in groups.items() if name in kept}, len(groups) - most


def _left_out(figure: Figure, hidden: int) -> None:
    if hidden:
        figure.text(0.01, 0.005, f"{hidden:,} smaller datasets not drawn: see the tables", fontsize=8, color="#555")


def turns_chart(turns: list[tuple[str, int, int]]) -> str:
    """Rows drawn by their number of entries (supervised turns), one panel per dataset."""
    if not turns:
        return _empty("no positions")
    by_dataset: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for dataset, count, rows in turns:
        by_dataset[dataset].append((count, rows))
    by_dataset, hidden = _top(by_dataset, lambda counts: sum(rows for _, rows in counts))
    figure = _figure(7, 1.4 * len(by_dataset) + 0.5)
    _left_out(figure, hidden)
    number = 0
    for panel, (dataset, counts) in enumerate(by_dataset.items(), start=1):
        axes = figure.add_subplot(len(by_dataset), 1, panel)
        for bar in axes.bar([c for c, _ in counts], [r for _, r in counts], color=_BAR):
            bar.set_gid(f"mark-turns-{number}")
            number += 1
        axes.set_title(_label(dataset), loc="left", fontsize=9)
        # The turn counts there are, each an integer tick: one value is one tick, not 0.6 .. 1.4.
        found = [c for c, _ in counts]
        axes.set_xlim(min(found) - 0.7, max(found) + 0.7)
        axes.set_xticks(range(min(found), max(found) + 1) if max(found) - min(found) < 15 else found)
        _counts(axes.yaxis)
        axes.set_ylabel("rows drawn")
        axes.spines[["top", "right"]].set_visible(False)
    figure.axes[-1].set_xlabel("entries per row (supervised turns)")
    return _svg(figure)


def length_chart(spec: SpecFigures) -> str:
    """Token lengths (before truncation) per dataset, stacked by status, the cutoff marked."""
    if not spec.histogram:
        return _empty("no positions")
    by_dataset: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for dataset, status, bin_number, entries in spec.histogram:
        by_dataset[dataset][status][bin_number] = entries
    by_dataset, hidden = _top(by_dataset, lambda statuses: sum(sum(bins.values()) for bins in statuses.values()))
    figure = _figure(7, 1.6 * len(by_dataset) + 1.1)
    _left_out(figure, hidden)
    panels = figure.subplots(len(by_dataset), 1, sharex=True, squeeze=False)[:, 0]  # one length axis for all
    number = 0
    shown: dict[str, Any] = {}  # one legend for the figure: each status drawn, in STATUSES order
    cutoff: Any = None  # the last panel's cutoff line, for the legend (there is at least one panel)
    for axes, (dataset, statuses) in zip(panels, by_dataset.items()):
        bottoms: dict[int, int] = defaultdict(int)
        for status in Specs.STATUSES:
            for bin_number, entries in sorted(statuses.get(status, {}).items()):
                bar, = axes.bar(bin_number * spec.bin_width, entries, width=spec.bin_width, align="edge",
                                bottom=bottoms[bin_number], color=STATUS_COLOURS[status])
                shown.setdefault(status, bar)
                bar.set_gid(f"mark-lengths-{number}")
                bottoms[bin_number] += entries
                number += 1
        cutoff = axes.axvline(spec.cutoff, color="#D55E00", linestyle="--", linewidth=1)
        axes.set_title(_label(dataset), loc="left", fontsize=9)
        axes.set_ylabel("positions")
        _counts(axes.yaxis)
        axes.spines[["top", "right"]].set_visible(False)
    handles = [shown[status] for status in Specs.STATUSES if status in shown] + [cutoff]
    figure.legend(handles, [status for status in Specs.STATUSES if status in shown] + [f"cutoff {spec.cutoff:,}"],
                  loc="outside upper center", ncols=len(handles), fontsize=9, frameon=False)
    figure.axes[-1].set_xlabel("tokens before truncation")
    return _svg(figure)


def fill_chart(plan: PlanFigures) -> str:
    """Packs by how full they are, in bins of 5%."""
    figure = _figure(7, 2.6)
    axes = figure.add_subplot()
    width = 100 / FILL_BINS
    for number, (bin_number, packs) in enumerate(plan.fill_histogram):
        bar, = axes.bar(bin_number * width, packs, width=width, align="edge", color=_BAR, edgecolor="white")
        bar.set_gid(f"mark-fill-{number}")
    axes.set_xlim(0, 100)
    axes.set_xlabel(f"fill of a pack of {plan.capacity:,} tokens (%)")
    axes.set_ylabel("packs")
    _counts(axes.yaxis)
    axes.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


#: Steps drawn at most in the balance chart (more are drawn as the worst of each run of them).
BALANCE_BARS = 400


def balance_chart(plan: PlanFigures) -> str:
    """Each global step's costliest rank over the ranks' mean: 1.0 is every rank waiting for no one."""
    ratios = [ratio for _, _, ratio in plan.balance]
    size = -(-len(ratios) // BALANCE_BARS) if ratios else 1  # steps a bar stands for
    worst = [max(ratios[at: at + size]) for at in range(0, len(ratios), size)]
    figure = _figure(7, 2.4)
    axes = figure.add_subplot()
    for number, ratio in enumerate(worst):
        bar, = axes.bar(number * size, ratio - 1, bottom=1, width=size, align="edge", color=_BAR)
        bar.set_gid(f"mark-balance-{number}")
    axes.set_ylim(1, max([1.05, *worst]) * 1.01)
    axes.set_xlabel("global step" + (f" (a bar: the worst of {size})" if size > 1 else ""))
    axes.set_ylabel("costliest rank / mean")
    _counts(axes.xaxis)  # steps are whole numbers
    axes.spines[["top", "right"]].set_visible(False)
    return _svg(figure)

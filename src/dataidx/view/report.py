"""``dataidx report``: one self-contained HTML file that shows what a mixture is made of.

Every style, script and chart is inline (charts are SVG from :mod:`.charts`), so the file opens
offline and can be mailed or attached to a run. Figures come from SQL (:mod:`.figures`); the
sampled entries are rendered as the model sees them (:mod:`.tokens`).
"""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..errors import UsageError, hide_passwords
from ..spec import DEFAULT_SEED
from ..store import connect_readonly
from . import charts
from .figures import Figures, Progress, gather
from .tokens import converted_samples, rendered_samples, sampled_positions

_STYLE = Path(__file__).with_name("report.css")
_SCRIPT = Path(__file__).with_name("report.js")


@dataclass
class ReportSummary:
    """What ``write_report`` wrote."""

    path: Path
    bytes: int
    seconds: float


def write_report(store: str | os.PathLike[str], output: str | os.PathLike[str], *, mixture: str = "default",
                 spec: str | None = None, plan: str | None = None, samples: int = 5, seed: int = DEFAULT_SEED,
                 progress: Progress | None = None) -> ReportSummary:
    """Write the report of ``mixture`` (with ``spec``'s lengths and ``plan``'s packs when named)
    to ``output``.

    Example::

        write_report("demo.db", "report.html", spec="default", plan="default", samples=5)
    """
    if samples < 0:
        raise UsageError(f"--samples must be 0 or more, got {samples}")
    started = time.perf_counter()
    path = os.fspath(store)
    connection = connect_readonly(path)
    try:
        figures = gather(path, connection, mixture, spec, plan, progress)
    finally:
        connection.close()
    positions = sampled_positions(figures.mixture["entries"], samples, seed)
    shown = rendered_samples(path, mixture, spec, positions) if spec else converted_samples(path, mixture, positions)
    page = _page(path, figures, shown, seed)
    target = Path(output)
    target.write_text(page, encoding="utf-8")
    return ReportSummary(target, len(page.encode()), time.perf_counter() - started)


def _table(header: list[str], rows: list[tuple]) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def _chart(name: str, svg: str, **data: object) -> str:
    attributes = "".join(f" data-{key.replace('_', '-')}='{value}'" for key, value in data.items())
    return f"<figure class='chart' id='chart-{name}'{attributes}>{svg}</figure>"


def _page(path: str, figures: Figures, samples: list[str], seed: int) -> str:
    sections = [_summary(path, figures), _mixture(figures)]
    if figures.spec is not None:
        sections.append(_lengths(figures))
    if figures.plan is not None:
        sections.append(_packing(figures))
    sections.append(_rejects(figures))
    what = "rendered under spec '" + figures.spec.name + "'" if figures.spec else "converted (no --spec given)"
    sections.append(f"<section id='samples'><h2>{len(samples)} sampled entries, {html.escape(what)} (seed {seed})</h2>"
                    "<p>Supervised tokens are highlighted; special tokens are boxed; hover a token for its id, "
                    "label and loss weight.</p>" + "".join(samples) + "</section>")
    title = f"dataidx report: {hide_passwords(path)}, mixture '{figures.mixture['name']}'"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE.read_text(encoding='utf-8')}</style></head><body><h1>{html.escape(title)}</h1>"
            + "".join(sections) + f"<div id='tip' hidden></div><script>{_SCRIPT.read_text(encoding='utf-8')}</script>"
            f"<footer>dataidx {__version__}</footer></body></html>")


def _summary(path: str, figures: Figures) -> str:
    build, mixture = figures.info["build"] or {}, figures.mixture
    facts = [("store", hide_passwords(path)), ("built", build.get("created_at")), ("config", build.get("config")),
             ("build seconds", build.get("seconds")), ("dataidx (build)", build.get("dataidx_version")),
             ("mixture", mixture["name"]), ("mixture seed", str(mixture["seed"])), ("sampling", mixture["sampling"]),
             ("entries", mixture["entries"])]
    sources = []
    for dataset in figures.info["datasets"]:
        files = dataset["files"]
        fingerprint = ", ".join(f.get("xxh3_128", "")[:12] for f in files[:3]) + (" ..." if len(files) > 3 else "")
        sources.append((dataset["name"], dataset["converter"], dataset["rows"], dataset["entries"],
                        sum(f.get("size", 0) for f in files), fingerprint, dataset["path"]))
    seeds = [(name, str(d["seed"]), d["size"], d["weight"], d["requested"], d["entries"])
             for name, d in mixture["datasets"].items()]
    return ("<section id='summary'><h2>Summary</h2>" + _table(["", ""], facts)
            + "<h3>Sources</h3>" + _table(["dataset", "converter", "rows", "entries", "bytes", "xxh3-128", "path"], sources)
            + "<h3>Draws</h3>" + _table(["dataset", "seed", "size", "weight", "requested", "entries"], seeds) + "</section>")


def _mixture(figures: Figures) -> str:
    rows = figures.composition
    chart = charts.horizontal_bars("mixture", [r["dataset"] for r in rows], [int(r["entries"]) for r in rows], "entries")
    table = _table(["dataset", "entries", "share", "base entries", "distinct rows", "max repeats"],
                   [(r["dataset"], r["entries"], f"{r['share']:.2%}", r["base_entries"], r["distinct_rows"],
                     r["max_repeats"]) for r in rows])
    return ("<section id='mixture'><h2>Mixture</h2>" + _chart("mixture", chart, marks=len(rows)) + table
            + "<h3>Turns per row</h3>" + _chart("turns", charts.turns_chart(figures.turns), marks=len(figures.turns))
            + "</section>")


def _lengths(figures: Figures) -> str:
    spec = figures.spec
    supervised = charts.horizontal_bars("supervised", [r[0] for r in spec.supervised], [int(r[3]) for r in spec.supervised],
                                        "supervised tokens (entries that train)")
    listed = _table(["dataset", "row", "cut", "status", "tokens", "why"], spec.not_training)
    return (f"<section id='lengths'><h2>Lengths under spec '{html.escape(spec.name)}'</h2>"
            "<p>Base entries of each dataset by token count before truncation, coloured by status.</p>"
            + _chart("lengths", charts.length_chart(spec), marks=len(spec.histogram), bin_width=spec.bin_width)
            + "<h3>Supervised tokens per dataset</h3>" + _chart("supervised", supervised, marks=len(spec.supervised))
            + _table(["dataset", "entries that train", "tokens", "supervised tokens"], spec.supervised)
            + "<h3>Entries that will not train, and why</h3>"
            + (_table(["dataset", "status", "entries", "example"], spec.reasons) + listed if spec.reasons
               else "<p>Every entry trains.</p>") + "</section>")


def _packing(figures: Figures) -> str:
    plan = figures.plan
    unpacked = plan.entries * plan.capacity - plan.tokens
    packed = plan.packs * plan.capacity - plan.tokens
    facts = [("packs", plan.packs), ("entries", plan.entries), ("tokens", plan.tokens), ("fill", f"{plan.fill:.2%}"),
             ("padding without packing (each entry padded to the capacity)", unpacked),
             ("padding with this plan", packed), ("padding saved", f"{1 - packed / unpacked:.2%}" if unpacked else "-")]
    return (f"<section id='packing'><h2>Packing plan '{html.escape(plan.name)}' ({plan.capacity:,} tokens a pack)</h2>"
            + _chart("fill", charts.fill_chart(plan), marks=len(plan.fill_histogram)) + _table(["", ""], facts)
            + "</section>")


def _rejects(figures: Figures) -> str:
    if not figures.reject_counts:
        return "<section id='rejects'><h2>Rejected rows</h2><p>None: the build kept every row.</p></section>"
    return ("<section id='rejects'><h2>Rejected rows</h2>" + _table(["dataset", "rows rejected"], figures.reject_counts)
            + _table(["dataset", "row", "reason"], figures.rejects) + "</section>")


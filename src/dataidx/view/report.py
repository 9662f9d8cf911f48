"""``dataidx report``: one self-contained HTML file that shows what a mixture is made of.

Every style, script and chart is inline (charts are SVG from :mod:`.charts`), so the file opens
offline and can be mailed or attached to a run. Figures come from SQL over the mixture's
positions (:mod:`.figures`), of every epoch or of one; the sampled entries are rendered as the
model sees them (:mod:`.tokens`). :func:`report_figures` gives the same figures as data.
"""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import UsageError, hide_passwords
from ..progress import CountProgress
from ..spec import DEFAULT_SEED
from ..store import open_store
from .document import report_document
from .evidence import evidence_figures, evidence_section, exact_figures, read_texts
from .figures import Figures, gather
from .reasoning import reasoning_section
from .sections import lengths, mixture_section, packing, rejects, summary
from .tokens import converted_samples, rendered_samples, sampled_positions

_STYLE = Path(__file__).with_name("report.css")
_SCRIPT = Path(__file__).with_name("report.js")


@dataclass
class ReportSummary:
    """What ``write_report`` wrote."""

    path: Path
    bytes: int
    seconds: float


def _gathered(store: str | os.PathLike[str], mixture: str, *, epoch: int | None, spec: str | None, plan: str | None,
              samples: int, seed: int, progress: CountProgress | None) -> tuple[str, Figures, list[tuple[int, int]]]:
    if samples < 0:
        raise UsageError(f"--samples must be 0 or more, got {samples}")
    path = os.fspath(store)
    with open_store(path) as handle:
        figures = gather(handle, mixture, spec=spec, plan=plan, epoch=epoch, progress=progress)
        figures.evidence, figures.exact = evidence_figures(handle), exact_figures(handle)
    chosen = [(e, entries) for e, _, entries in figures.epochs if epoch is None or e == epoch]
    return path, figures, sampled_positions(chosen, samples, seed)


def report_figures(store: str | os.PathLike[str], *, mixture: str = "default", epoch: int | None = None,
                   spec: str | None = None, plan: str | None = None, samples: int = 5,
                   seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The figures ``write_report`` draws, as one JSON-able dict (``dataidx report --json``).

    Example::

        report_figures("demo.db", mixture="by_tokens", spec="default")["spec"]["supervised"]
    """
    _, figures, picks = _gathered(store, mixture, epoch=epoch, spec=spec, plan=plan, samples=samples, seed=seed,
                                  progress=None)
    return report_document(figures, picks)


def write_report(store: str | os.PathLike[str], output: str | os.PathLike[str], *, mixture: str = "default",
                 epoch: int | None = None, spec: str | None = None, plan: str | None = None, samples: int = 5,
                 seed: int = DEFAULT_SEED, progress: CountProgress | None = None,
                 trust_remote_code: bool = False) -> ReportSummary:
    """Write the report of ``mixture`` (of epoch ``epoch``, or of all; with ``spec``'s lengths
    and ``plan``'s packs when named) to ``output``. ``trust_remote_code`` lets the sampled
    entries of a spec rendered with ``--trust-remote-code`` load its tokenizer, running its code.

    Example::

        write_report("demo.db", "report.html", spec="default", plan="default", samples=5)
    """
    started = time.perf_counter()
    path, figures, picks = _gathered(store, mixture, epoch=epoch, spec=spec, plan=plan, samples=samples, seed=seed,
                                     progress=progress)
    epochs = len(figures.epochs)
    shown = (rendered_samples(path, mixture, spec=spec, picks=picks, epochs=epochs,
                              trust_remote_code=trust_remote_code) if spec
             else converted_samples(path, mixture, picks, epochs))
    page = _page(path, figures, shown, seed, read_texts(path, figures.evidence, figures.exact))
    target = Path(output)
    target.write_text(page, encoding="utf-8")
    return ReportSummary(target, len(page.encode()), time.perf_counter() - started)


def _page(path: str, figures: Figures, samples: list[str], seed: int, texts: dict[int, str]) -> str:
    sections = [summary(path, figures), mixture_section(figures)]
    if figures.spec is not None:
        sections += [lengths(figures, figures.spec), reasoning_section(figures)]
    if figures.plan is not None:
        sections.append(packing(figures, figures.plan))
    sections += [rejects(figures), evidence_section(figures.evidence, texts, figures.exact)]
    what = "rendered under spec '" + figures.spec.name + "'" if figures.spec else "converted (no --spec given)"
    over = f"epoch {figures.epoch}, " if figures.epoch is not None else \
        f"all {len(figures.epochs)} epochs, " if len(figures.epochs) > 1 else ""
    sections.append(f"<section id='samples'><h2>{len(samples)} sampled entries, {over}{html.escape(what)} "
                    f"(seed {seed})</h2><p>Supervised tokens are highlighted; special tokens are boxed; an entry "
                    "that does not train is grey; a character whose bytes span tokens is drawn in the first one's "
                    "box, the others left empty; hover a token for its id, label and loss weight.</p>"
                    + "".join(samples) + "</section>")
    title = f"dataidx report: {hide_passwords(path)}, mixture '{figures.mixture['name']}'" + (
        "" if figures.epoch is None else f", epoch {figures.epoch}")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE.read_text(encoding='utf-8')}</style></head><body><h1>{html.escape(title)}</h1>"
            + "".join(sections) + f"<div id='tip' hidden></div><script>{_SCRIPT.read_text(encoding='utf-8')}</script>"
            f"<footer>dataidx {__version__}</footer></body></html>")

"""The report's reasoning figures: per dataset, the positions that train with reasoning and
without (and their tokens), and the reasoning problems among them (set by
:mod:`dataidx.render.reasoning`). One range join over the positions, like every figure, read by
:meth:`dataidx.store.PositionFigures.reasoning`."""

from __future__ import annotations

import html
from typing import Any

from ..store import Specs, StoreHandle
from .positions import Selection

#: What each row of :func:`reasoning_rows` holds, after the dataset: the JSON keys.
KEYS = ("positions_with_reasoning", "tokens_with_reasoning", "positions_without", "tokens_without",
        *Specs.REASONING_PROBLEMS)


def reasoning_rows(handle: StoreHandle, selection: Selection, spec_id: int) -> list[tuple]:
    """``(dataset, *KEYS)`` per dataset over the selection's positions that train under the spec."""
    rows = selection.figures(handle).reasoning(spec_id)
    return [(dataset, *(int(value or 0) for value in counts)) for dataset, *counts in rows]


def reasoning_document(rows: list[tuple]) -> list[dict[str, Any]]:
    """The rows for ``dataidx report --json``."""
    return [dict(zip(("dataset", *KEYS), row)) for row in rows]


def reasoning_section(figures: Any) -> str:
    """The section of the report's :class:`.figures.Figures` under its spec."""
    spec = figures.spec
    over = f"epoch {figures.epoch}" if figures.epoch is not None else "all positions"
    found = [problem for number, problem in enumerate(Specs.REASONING_PROBLEMS)
             if any(row[5 + number] for row in spec.reasoning)]
    said = "".join(f"<li><code>{problem}</code>: {html.escape(Specs.REASONING_SAID[problem][0])}: "
                   f"{html.escape(Specs.REASONING_SAID[problem][1])}</li>" for problem in found)
    return (f"<section id='reasoning'><h2>Reasoning under spec '{html.escape(spec.name)}', {over}</h2>"
            "<p>Of the positions that train: those whose trained turns have reasoning (reasoning blocks or "
            "inline <code>&lt;think&gt;</code>, which trains as text, as LLaMA-Factory v1 does) and those without, "
            "and the problems found, checked on the rendered text (see docs/rendering.md).</p>"
            + _table(["dataset", "positions with reasoning", "their tokens", "positions without", "their tokens",
                      *Specs.REASONING_PROBLEMS], spec.reasoning)
            + (f"<ul>{said}</ul>" if said else "<p>No reasoning problem found.</p>") + "</section>")


def _table(header: list[str], rows: list[tuple]) -> str:
    """The report's table markup (as :func:`.sections.table`, which imports the figures these rows are part of)."""
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell if isinstance(cell, str) else f'{cell:,}')}</td>"
                                    for cell in row) + "</tr>" for row in rows)
    return f"<table class='reasoning'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

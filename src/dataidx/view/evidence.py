"""The report's Evidence section: the exact duplicates the build found, the store's lists of near
duplicates and benchmark leaks (``dataidx dedup``, ``decontaminate``), what each flags per
dataset, and a few of its entries as a reviewer checks them: a duplicate beside the row it
duplicates, a leak's text with the span found marked. Figures are SQL over the documented
views; the texts are the rows, read and converted as a fetch reads them."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from ..dedup import sample_text
from ..read import EntryReader
from ..store import Evidence, StoreHandle
from .sections import table

#: Examples shown per list.
EXAMPLES = 5
#: Characters of a row's text shown (the rest said, not shown).
SHOWN_CHARACTERS = 1_500

_COUNTS = {
    "near_duplicates": "SELECT dataset, count(DISTINCT \"row\"), count(*) FROM duplicates WHERE run = {mark} "
                       "GROUP BY dataset ORDER BY dataset",
    "contamination": "SELECT dataset, count(DISTINCT \"row\"), count(DISTINCT entry_id) FROM contamination "
                     "WHERE run = {mark} GROUP BY dataset ORDER BY dataset",
}
_EXAMPLES = {
    "near_duplicates": "SELECT entry_id, representative_entry, dataset, \"row\", representative_dataset, "
                       "representative_row, jaccard FROM duplicates WHERE run = {mark} AND cut IS NOT DISTINCT FROM "
                       "representative_cut ORDER BY jaccard, entry_id LIMIT {mark}",
    "contamination": "SELECT entry_id, dataset, \"row\", eval_set, item, score, span FROM contamination "
                     "WHERE run = {mark} ORDER BY score DESC, entry_id LIMIT {mark}",
}


_EXACT_COUNTS = ("SELECT dataset, count(*) FROM exact_duplicates WHERE entry_id <> representative_entry "
                 "GROUP BY dataset ORDER BY dataset", "SELECT dataset, count(*) FROM same_prompts GROUP BY dataset "
                 "ORDER BY dataset")
_EXACT_EXAMPLES = ("SELECT entry_id, representative_entry, dataset, \"row\", representative_dataset, "
                   "representative_row, copies FROM exact_duplicates WHERE entry_id <> representative_entry "
                   "ORDER BY copies DESC, entry_id LIMIT {mark}")


@dataclass
class ExactFigures:
    """The build's exact duplicates: per dataset, entries that repeat another's messages and
    entries that share a prompt side; a few copies, the most repeated first (rows of the view)."""

    counts: list[tuple[str, int, int]]
    examples: list[tuple[Any, ...]]


def exact_figures(handle: StoreHandle) -> ExactFigures | None:
    """The exact duplicates and shared prompts of the store, or None where there are none."""
    copies, prompts = (dict(handle.all(sql)) for sql in _EXACT_COUNTS)
    if not copies and not prompts:
        return None
    counts = [(dataset, copies.get(dataset, 0), prompts.get(dataset, 0)) for dataset in sorted({*copies, *prompts})]
    return ExactFigures(counts, handle.all(_EXACT_EXAMPLES, EXAMPLES))


@dataclass
class ListFigures:
    """One list: its record, what it flags per dataset, and its examples (rows of the view)."""

    run: Evidence.StoredRun
    counts: list[tuple[str, int, int]]
    examples: list[tuple[Any, ...]]


def evidence_figures(handle: StoreHandle) -> list[ListFigures]:
    """Every list of the store, with its counts and examples (their texts not read yet)."""
    return [ListFigures(run, handle.all(_COUNTS[run.kind], run.name), handle.all(_EXAMPLES[run.kind], run.name,
                                                                                   EXAMPLES))
            for run in Evidence(handle).runs()]


def read_texts(path: str, lists: list[ListFigures], exact: ExactFigures | None = None) -> dict[int, str]:
    """The whole texts of the examples' entries (and their representatives), read from the rows."""
    wanted = sorted({entry for figures in lists for example in figures.examples
                     for entry in (example[:2] if figures.run.kind == "near_duplicates" else example[:1])}
                    | {entry for example in (exact.examples if exact else []) for entry in example[:2]})
    if not wanted:
        return {}
    with EntryReader(path) as reader:
        found = dict(zip(wanted, reader.entries_by_id(wanted)))
        return {entry: sample_text(reader.sample(*found[entry])).whole for entry in wanted}


def evidence_section(lists: list[ListFigures], texts: dict[int, str], exact: ExactFigures | None = None) -> str:
    """The section, or nothing for a store without lists or exact duplicates."""
    if not lists and exact is None:
        return ""
    parts = ["<section id='evidence'><h2>Evidence: duplicates and benchmark leaks</h2><p>Exact duplicates the "
             "build found, and lists made by dataidx dedup and dataidx decontaminate. Nothing is deleted: a mixture "
             "drawn with --exclude LIST leaves a list's rows out (the duplicates and contamination views hold every "
             "entry).</p>"]
    if exact is not None:
        parts.append("<div class='exact'><h3>Exact duplicates, found at build</h3><p>Entries whose messages another "
                     "entry's equal (each text's surrounding whitespace trimmed), beyond each group's first, and "
                     "entries whose prompt another shares (views exact_duplicates, same_prompts).</p>"
                     + table(["dataset", "entries repeating another", "entries sharing a prompt"], exact.counts)
                     + _copies(exact, texts) + "</div>")
    for figures in lists:
        run = figures.run
        said = ", ".join(f"{key} {value}" for key, value in sorted(run.params.items()) if not isinstance(value, dict))
        parts.append(f"<h3 class='evidence-list' data-list='{html.escape(run.name)}'>List '{html.escape(run.name)}'"
                     f" ({run.kind}): {run.entries:,} entries</h3><p class='params'>{html.escape(said)}</p>"
                     + table(["dataset", "rows", "entries"], figures.counts))
        parts.append(_duplicates(figures, texts) if run.kind == "near_duplicates" else _leaks(figures, texts))
    return "".join(parts) + "</section>"


def _duplicates(figures: ListFigures, texts: dict[int, str]) -> str:
    rows = []
    for entry, representative, dataset, row, rep_dataset, rep_row, jaccard in figures.examples:
        rows.append(f"<tr class='duplicate'><td class='jaccard'>{jaccard:.4f}</td><td><b>{html.escape(dataset)} row "
                    f"{row}</b><div class='text'>{_shown(texts.get(entry, ''))}</div></td><td><b>"
                    f"{html.escape(rep_dataset)} row {rep_row} (kept)</b><div class='text'>"
                    f"{_shown(texts.get(representative, ''))}</div></td></tr>")
    return ("<table class='duplicates'><tr><th>Jaccard (exact)</th><th>duplicate</th><th>representative</th></tr>"
            + "".join(rows) + "</table>") if rows else ""


def _copies(exact: ExactFigures, texts: dict[int, str]) -> str:
    rows = [f"<tr class='copy'><td class='copies'>{copies:,}</td><td><b>{html.escape(dataset)} row {row}</b><div "
            f"class='text'>{_shown(texts.get(entry, ''))}</div></td><td><b>{html.escape(rep_dataset)} row {rep_row} "
            f"(first)</b><div class='text'>{_shown(texts.get(representative, ''))}</div></td></tr>"
            for entry, representative, dataset, row, rep_dataset, rep_row, copies in exact.examples]
    return ("<table class='copies'><tr><th>copies in the group</th><th>copy</th><th>representative</th></tr>"
            + "".join(rows) + "</table>") if rows else ""


def _leaks(figures: ListFigures, texts: dict[int, str]) -> str:
    rows = []
    for entry, dataset, row, eval_set, item, score, span in figures.examples:
        rows.append(f"<tr class='leak'><td class='score'>{score:.4f}</td><td>{html.escape(eval_set)} item {item}</td>"
                    f"<td><b>{html.escape(dataset)} row {row}</b><div class='text'>"
                    f"{_marked(texts.get(entry, ''), span)}</div></td></tr>")
    return ("<table class='leaks'><tr><th>score</th><th>eval item</th><th>row, the span found marked</th></tr>"
            + "".join(rows) + "</table>") if rows else ""


def _shown(text: str) -> str:
    cut = text[:SHOWN_CHARACTERS]
    more = f" … ({len(text) - len(cut):,} more characters)" if len(text) > len(cut) else ""
    return html.escape(cut) + more


def _marked(text: str, span: str) -> str:
    """``text`` with the first run of ``span``'s words (any case, any separators) marked."""
    words = span.split()
    found = re.search(r"\W+".join(re.escape(word) for word in words), text, flags=re.IGNORECASE) if words else None
    if found is None:
        return _shown(text)
    start, end = found.span()
    before = text[max(0, start - 300):start]
    after = text[end:end + 300]
    return (("… " if start > 300 else "") + html.escape(before) + f"<mark>{html.escape(text[start:end])}</mark>"
            + html.escape(after) + (" …" if end + 300 < len(text) else ""))

"""The report's Evidence section (issue 55): each list with its counts per dataset as the views
count them, a duplicate beside the row it duplicates, a leak's text with its span marked, in a
real browser; the same counts in ``report --json``'s document."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dataidx.dedup import find_duplicates, find_leaks, parse_eval, read_eval
from dataidx.view import report_figures, write_report

from .helpers import write_jsonl
from .test_dedup import planted  # noqa: F401 - the planted corpus's store, a fixture


@pytest.fixture(scope="module")
def listed(planted: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("report-evidence")
    store = folder / "d.db"
    store.write_bytes(planted[0].read_bytes())
    first = [json.loads(line) for line in (planted[0].parent / "first.jsonl").read_text().splitlines()]
    write_jsonl(folder / "eval.jsonl", [{"question": " ".join(row["output"].split()[:30])} for row in first[150:153]])
    find_duplicates(store, "twins", jobs=1)
    find_leaks(store, "bench_leaks", [read_eval(*parse_eval(f"bench={folder / 'eval.jsonl'}"))], jobs=1)
    return store


def counts(store: Path, view: str, run: str) -> list[list[str]]:
    with sqlite3.connect(store) as connection:
        found = connection.execute(f"SELECT dataset, count(DISTINCT row), count(DISTINCT entry_id) FROM {view} "
                                   "WHERE run = ? GROUP BY dataset ORDER BY dataset", (run,)).fetchall()
    connection.close()
    return [[dataset, f"{rows:,}", f"{entries:,}"] for dataset, rows, entries in found]


def exact_counts(store: Path) -> list[list[str]]:
    with closing(sqlite3.connect(store)) as connection:
        copies = dict(connection.execute("SELECT dataset, count(*) FROM exact_duplicates WHERE entry_id <> "
                                         "representative_entry GROUP BY dataset").fetchall())
        prompts = dict(connection.execute("SELECT dataset, count(*) FROM same_prompts GROUP BY dataset").fetchall())
    return [[dataset, f"{copies.get(dataset, 0):,}", f"{prompts.get(dataset, 0):,}"]
            for dataset in sorted({*copies, *prompts})]


def test_the_document_counts_each_list_as_the_views_do(listed: Path) -> None:
    exact = report_figures(listed, samples=0)["exact_duplicates"]
    assert [[row["dataset"], f"{row['copies']:,}", f"{row['same_prompts']:,}"] for row in exact] == exact_counts(
        listed) == [["first", "0", "85"], ["second", "40", "85"]]  # 40 copies; 70 + 15 rows share a prompt
    document = report_figures(listed, samples=0)["evidence"]
    assert [(one["name"], one["kind"]) for one in document] == [("twins", "near_duplicates"),
                                                                ("bench_leaks", "contamination")]
    for one, view in zip(document, ("duplicates", "contamination")):
        assert [[row["dataset"], f"{row['rows']:,}", f"{row['entries']:,}"] for row in one["datasets"]] == counts(
            listed, view, one["name"])


@pytest.mark.slow
def test_the_evidence_section_in_a_browser(listed: Path, browser, tmp_path: Path) -> None:
    write_report(listed, tmp_path / "r.html", samples=0)
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    page.goto((tmp_path / "r.html").as_uri())
    assert page.locator("#evidence h3.evidence-list").all_inner_texts() == [
        "List 'twins' (near_duplicates): 70 entries", "List 'bench_leaks' (contamination): 3 entries"]
    tables = page.locator("#evidence > table:not(.duplicates):not(.leaks)")
    for number, (view, run) in enumerate((("duplicates", "twins"), ("contamination", "bench_leaks"))):
        rows = [row.split("\t") for row in tables.nth(number).locator("tr").all_inner_texts()]
        assert rows[1:] == counts(listed, view, run), rows
    pairs = page.locator("#evidence tr.duplicate")
    with sqlite3.connect(listed) as connection:  # the least similar first: what a reviewer checks
        least = connection.execute("SELECT dataset, row, representative_dataset, representative_row, jaccard FROM "
                                   "duplicates WHERE run = 'twins' ORDER BY jaccard, entry_id LIMIT 5").fetchall()
        spans = dict(connection.execute("SELECT row, span FROM contamination WHERE run = 'bench_leaks'").fetchall())
    connection.close()
    assert pairs.count() == 5
    for number, (dataset, row, kept, kept_row, jaccard) in enumerate(least):
        shown = pairs.nth(number).inner_text()
        assert shown.startswith(f"{jaccard:.4f}") and f"{dataset} row {row}\n" in shown, shown[:80]
        assert f"{kept} row {kept_row} (kept)" in shown and 0.8 <= jaccard < 1
    exact_rows = [row.split("\t") for row in page.locator("#evidence .exact > table").first.locator(
        "tr").all_inner_texts()]
    assert exact_rows[1:] == exact_counts(listed)
    copies = page.locator("#evidence tr.copy")
    assert copies.count() == 5
    for number in range(5):
        copy, kept = (copies.nth(number).locator("div.text").nth(side).inner_text() for side in (0, 1))
        assert copy == kept and len(copy) > 100
    marks = page.locator("#evidence tr.leak mark")
    assert marks.count() == 3
    for number in range(3):
        marked = marks.nth(number).inner_text()
        assert " ".join(re.findall(r"\w+", marked.lower())) in spans.values(), marked
        box = marks.nth(number).bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0
    page.locator("#evidence").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "evidence.png"), full_page=True)
    page.close()

"""Benchmark leaks (issue 55): rows that hold an eval item whole or as most of a span are found
with the item, score and span; a fragment below the threshold and a set's template phrases are
not leaks; the list is stored with its evidence (the contamination view) and deletes nothing;
every bad eval set or option is one line and writes nothing."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.dedup.leaks import EvalIndex
from dataidx.index import build

from .helpers import one_line_error, write_jsonl, write_yaml

WORDS = [f"v{i}" for i in range(4000)]


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """100 alpaca rows and a 50-item eval set: rows 0-4 hold an item whole (in the prompt or the
    answer, cased and punctuated otherwise), rows 5-7 most of one, rows 8-9 a fifth of one; every
    item opens with the set's template phrase, which all other rows hold too."""
    rng = random.Random(3)
    folder = tmp_path_factory.mktemp("leaks")
    template = "which one of the following statements is correct about this"
    items = [f"{template} {words(rng, 20)}" for _ in range(50)]
    rows = [{"instruction": f"{template} {words(rng, 30)}", "input": "", "output": words(rng, 60)} for _ in range(100)]
    for row in range(5):
        where = "instruction" if row % 2 else "output"
        rows[row][where] += " " + items[row * 3].upper().replace(" about ", ", ABOUT: ")
    for row in range(5, 8):
        rows[row]["output"] += " " + " ".join(items[row * 3].split()[8:])  # 22 of 30 words
    for row in range(8, 10):
        rows[row]["output"] += " " + " ".join(items[row * 3].split()[10:16])  # 6 of 30 words
    write_jsonl(folder / "train.jsonl", rows)
    write_yaml(folder / "d.yaml", f"train:\n  path: {folder / 'train.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(folder / "d.yaml", folder / "d.db")
    write_jsonl(folder / "bench.jsonl", [{"question": item, "answer": "A"} for item in items])
    return folder / "d.db", folder / "bench.jsonl", {"whole": list(range(5)), "most": [5, 6, 7]}


def found(store: Path, name: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as connection:
        rows = connection.execute("SELECT row, eval_set, item, score, span FROM contamination WHERE run = ? "
                                  "ORDER BY entry_id", (name,)).fetchall()
    connection.close()
    return rows


def test_leaks_are_found_with_their_span(leaky: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(leaky[0].read_bytes())
    result = CliRunner().invoke(cli, ["decontaminate", str(store), "--eval", f"bench={leaky[1]}", "--name", "leaks",
                                      "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "8 rows (8 entries) hold an eval item at 0.5 or more" in result.stderr
    leaks = found(store, "leaks")
    assert [row for row, *_ in leaks] == leaky[2]["whole"] + leaky[2]["most"]
    assert all(item == row * 3 and eval_set == "bench" for row, eval_set, item, _, _ in leaks)
    # the template's n-grams are not looked for: a whole item's span starts where they end (27 of 30 words)
    assert [score for row, _, _, score, _ in leaks if row < 5] == [0.9] * 5
    assert all(score == round(22 / 30, 6) for row, _, _, score, _ in leaks if row >= 5)
    assert leaks[0][4].startswith("the following statements is correct about this v") and len(leaks[0][4].split()) == 27
    with sqlite3.connect(store) as connection:
        params = json.loads(connection.execute("SELECT params FROM evidence_runs WHERE name = 'leaks'").fetchone()[0])
        assert connection.execute("SELECT count(*) FROM base_entries").fetchone() == (100,)
    connection.close()
    assert params["n"] == 8 and params["eval_sets"]["bench"]["field"] == "question"
    assert params["eval_sets"]["bench"]["template_ngrams"] >= 1 and len(params["eval_sets"]["bench"]["sha256"]) == 64


def test_a_template_shared_by_items_is_not_a_leak() -> None:
    index = EvalIndex(["the answer is one of these: alpha beta gamma delta",
                       "the answer is one of these: red green blue yellow",
                       "the answer is one of these: north south east west"], 5)
    assert index.common >= 1
    assert index.best(["so the answer is one of these: cats dogs birds fish"], 0.3) == []
    assert [m.item for m in index.best(["so the answer is one of these: red green blue yellow"], 0.5)] == [1]


def test_bad_eval_sets_and_options_are_one_line(leaky: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(leaky[0].read_bytes())
    before = store.read_bytes()
    (tmp_path / "notjson.jsonl").write_text("{not json\n")
    (tmp_path / "empty.jsonl").write_text("")
    write_jsonl(tmp_path / "fields.jsonl", [{"query": "a b c"}])
    runner = CliRunner()
    base = ["decontaminate", str(store), "--name", "x", "--eval"]
    one_line_error(runner.invoke(cli, [*base, f"e={tmp_path / 'notjson.jsonl'}"]), "not an eval set of JSON lines")
    one_line_error(runner.invoke(cli, [*base, f"e={tmp_path / 'empty.jsonl'}"]), "eval set 'e' has no items")
    one_line_error(runner.invoke(cli, [*base, f"e={tmp_path / 'fields.jsonl'}"]), "give its field", "query")
    one_line_error(runner.invoke(cli, [*base, f"e={leaky[1]}:missing"]), "item 0: no text field 'missing'")
    one_line_error(runner.invoke(cli, [*base, f"e={tmp_path / 'absent.jsonl'}"]), "cannot read eval set 'e'")
    one_line_error(runner.invoke(cli, [*base, "nonsense"]), "give NAME=FILE")
    one_line_error(runner.invoke(cli, [*base, f"e={leaky[1]}", "--threshold", "0"]), "--threshold 0")
    one_line_error(runner.invoke(cli, [*base, f"e={leaky[1]}", "--n", "1"]), "--n 1")
    assert store.read_bytes() == before
    assert runner.invoke(cli, [*base, f"e={leaky[1]}", "-q"]).exit_code == 0
    one_line_error(runner.invoke(cli, [*base, f"e={leaky[1]}"]), "a list 'x' is there already")

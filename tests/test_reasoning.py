"""Reasoning checked, not assumed: each entry's reasoning status under real templates (Qwen2.5
ignores reasoning, Qwen3 keeps the last turn's), and where users see it: ``entry_lengths``,
``dataidx compose --spec``, ``dataidx info`` and the report (in a real browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import Renderer, load_tokenizer
from dataidx.store import run_query

from .conformance import build_tokenizer, template_text
from .conformance.conversations import answer, call, user
from .helpers import write_jsonl

pytestmark = pytest.mark.slow  # real Qwen templates, and the report in Chromium

pytest.importorskip("transformers")

#: One single-turn row per case: (messages, status under qwen2_5, status under qwen3). Qwen3's
#: template rewrites an inline <think> (the prefixes no longer locate the turn: render_error, no status).
CASES = [
    ([user("Is 91 prime?"), answer("No: 91 = 7 x 13.", reasoning="Try 7: 7 x 13 = 91.")], "dropped", "kept"),
    ([user("Say no. /no_think"), answer("No.", reasoning="The user wants no.")], "dropped", "mode_mismatch"),
    ([user("Why? /think"), answer("Because.")], "mode_mismatch", "mode_mismatch"),
    ([user("Think aloud."), answer("<think>\nhmm\n</think>\n\nDone.")], "inline", None),
    ([user("Unclosed?"), answer("<think>I never close this")], "unclosed", "unclosed"),
    ([user("Only think."), answer("<think>all thought</think>")], "no_answer", None),
    ([user("Weather?"), call("get_weather", {"city": "Lima"}, reasoning="I need the tool.")], "dropped", "kept"),
    ([user("Hello"), answer("Hi.")], None, None),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cases as one store, rendered under qwen2_5 and qwen3 with ``dataidx render``."""
    folder = tmp_path_factory.mktemp("reasoning")
    rows = write_jsonl(folder / "thoughts.jsonl", [{"messages": messages} for messages, _, _ in CASES])
    (folder / "config.yaml").write_text(f"thoughts:\n  path: {rows}\n  source: local\n")
    build(folder / "config.yaml", folder / "thoughts.db")
    for slug in ("qwen2_5", "qwen3"):
        result = CliRunner().invoke(cli, ["render", str(folder / "thoughts.db"), "--tokenizer",
                                          str(build_tokenizer(slug, folder / slug)), "--name", slug,
                                          "--cutoff", "4096"])
        assert result.exit_code == 0, result.output
        (folder / f"{slug}.txt").write_text(result.output)
    return folder / "thoughts.db"


def test_render_counts_each_reasoning_status_worst_first(store: Path) -> None:
    said = store.with_name("qwen2_5.txt").read_text()
    assert ("reasoning under spec 'qwen2_5': 3 dropped, 1 unclosed, 1 no_answer, 1 mode_mismatch, 1 inline "
            "(dataidx info explains each problem)") in said


def stored(store: Path, spec: str) -> dict[int, tuple]:
    _, rows = run_query(store, "SELECT row, status, reasoning, detail FROM entry_lengths WHERE spec = :spec",
                        {"spec": spec})
    return {row: rest for row, *rest in rows}


@pytest.mark.parametrize("slug, column", [("qwen2_5", 1), ("qwen3", 2)])
def test_each_entry_has_its_reasoning_status_and_trains_as_before(store: Path, slug: str, column: int) -> None:
    found = stored(store, slug)
    assert {row: reasoning for row, (_, reasoning, _) in found.items()} == \
        {row: case[column] for row, case in enumerate(CASES)}
    assert {row for row, (status, _, _) in found.items() if status != "ok"} == (set() if slug == "qwen2_5" else {3, 5})
    for status, reasoning, detail in found.values():
        if status != "ok":
            continue
        if reasoning in ("dropped", "unclosed", "no_answer", "mode_mismatch"):
            assert detail.startswith(
                f"reasoning {dict(no_answer='without', mode_mismatch='mode').get(reasoning, reasoning)}")
        else:
            assert detail is None
    if slug == "qwen2_5":
        assert found[0][2] == ("reasoning dropped: the template does not write message 1's reasoning into the "
                               "trained text")


def test_compose_counts_reasoning_per_dataset(store: Path) -> None:
    result = CliRunner().invoke(cli, ["compose", str(store), "--spec", "qwen2_5", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert (row["reasoning_entries"], row["plain_entries"]) == (7, 1)
    assert row["reasoning_tokens"] + row["plain_tokens"] == row["tokens"] and row["plain_tokens"] > 0
    assert (row["reasoning_dropped"], row["reasoning_unclosed"], row["reasoning_no_answer"],
            row["reasoning_mode_mismatch"]) == (3, 1, 1, 1)
    text = CliRunner().invoke(cli, ["compose", str(store), "--spec", "qwen3"]).output
    assert "reasoning_dropped" in text and "reasoning_mode_mismatch" in text


def test_info_says_each_reasoning_problem_once_per_spec(store: Path) -> None:
    result = CliRunner().invoke(cli, ["info", str(store)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("spec ")]
    assert ("spec 'qwen2_5': reasoning dropped from the trained tokens in 3 entries (e.g. thoughts row 0 cut 2): "
            "the template does not write it") in lines
    assert not any(line.startswith("spec 'qwen3': reasoning dropped") for line in lines)
    assert sum(line.startswith("spec 'qwen3': ") for line in lines) == 2  # unclosed, mode mismatch
    specs = {spec["name"]: spec for spec in json.loads(CliRunner().invoke(cli, ["info", str(store), "--json"]).output)
             ["render_specs"]}
    assert [(p["status"], p["entries"]) for p in specs["qwen3"]["reasoning_problems"]] == \
        [("unclosed", 1), ("mode_mismatch", 2)]


def test_a_pair_takes_the_worse_side_and_a_whole_conversation_every_turn(tmp_path: Path) -> None:
    tokenizer = __import__("transformers").AutoTokenizer.from_pretrained(build_tokenizer("qwen3", tmp_path / "q3"))
    renderer = Renderer(tokenizer, template_text("qwen3"), cutoff=4096)
    kept = [user("Q?"), answer("A.", reasoning="Think.")]
    pair = renderer.render({"chosen_messages": kept, "rejected_messages": [user("Q?"), answer("<think>oops")]}, False)
    assert (pair.reasoning, pair.sides["chosen"].reasoning, pair.sides["rejected"].reasoning) == \
        ("unclosed", "kept", "unclosed")
    assert pair.detail.startswith("rejected: reasoning unclosed")
    # Not cut, last message a user's: every assistant turn trains, the first one's reasoning too.
    plain = Renderer(load_tokenizer(build_tokenizer("qwen2_5", tmp_path / "q25")), template_text("qwen2_5"),
                     cutoff=4096)
    whole = plain.render({"messages": [*kept, user("And?"), answer("B."), user("Bye.")]}, False)
    assert whole.reasoning == "dropped" and "message 1" in whole.detail


def test_the_report_shows_reasoning_per_dataset(store: Path, tmp_path: Path, browser) -> None:
    result = CliRunner().invoke(cli, ["report", str(store), "--spec", "qwen2_5", "--json", "--samples", "0"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["spec"]["reasoning"]
    assert (row["dataset"], row["positions_with_reasoning"], row["positions_without"], row["dropped"]) == \
        ("thoughts", 7, 1, 3)
    page_path = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(store), "-o", str(page_path), "--spec", "qwen2_5",
                                      "--samples", "1"])
    assert result.exit_code == 0, result.output
    page = browser.new_page()
    page.goto(page_path.as_uri())
    assert page.is_visible("#reasoning table.reasoning")
    cells = page.locator("#reasoning tbody tr").first.locator("td").all_inner_texts()
    assert cells[:3] == ["thoughts", "7", str(row["tokens_with_reasoning"])] and cells[5] == "3"
    assert "the template does not write it" in page.locator("#reasoning").inner_text()
    page.close()

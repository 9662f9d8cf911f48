"""Why entries do not train, said once per cause: real families' templates on hand-written
conversations, through ``dataidx render``, ``info``, SQL and the report (in a real browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import Renderer, load_tokenizer
from dataidx.store import run_query

from .conformance import build_tokenizer
from .conformance.conversations import call, conversations, user
from .helpers import write_jsonl

pytest.importorskip("transformers")

ADVICE = "the template decides this: pass one that renders these conversations with --template FILE"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-written conversations, rendered with DeepSeek-R1-Distill's, Mistral Nemo's and Gemma-2's templates."""
    folder = tmp_path_factory.mktemp("causes")
    data = write_jsonl(folder / "handmade.jsonl", conversations())
    (folder / "config.yaml").write_text(f"handmade:\n  path: {data}\n  source: local\n")
    build(folder / "config.yaml", folder / "causes.db")
    for slug in ("deepseek_r1_distill", "mistral_nemo", "gemma2"):
        result = CliRunner().invoke(cli, ["render", str(folder / "causes.db"), "--tokenizer",
                                          str(build_tokenizer(slug, folder / slug)), "--name", slug,
                                          "--cutoff", "4096"])
        assert result.exit_code == 0, result.output
        (folder / f"{slug}.txt").write_text(result.output)
    return folder / "causes.db"


def causes(store: Path, spec: str) -> dict[str, int]:
    _, rows = run_query(store, f"SELECT cause, count(*) FROM entry_lengths WHERE spec = '{spec}' GROUP BY cause")
    return {cause: n for cause, n in rows}


def test_render_says_once_why_deepseeks_generation_prompt_trains_nothing(store: Path) -> None:
    said = store.with_name("deepseek_r1_distill.txt").read_text()
    found = causes(store, "deepseek_r1_distill")
    # Its generation prompt ends with <think>\n, which no rendered conversation holds: v1 trains nothing either.
    assert found["generation_prompt"] >= 30 and found["generation_prompt"] > 4 * found.get(None, 0)
    total = sum(n for cause, n in found.items() if cause is not None)
    assert f"why {total} entries of spec 'deepseek_r1_distill' do not train:" in said
    assert f"{found['generation_prompt']:>11,}  the template's generation prompt is not how it writes " \
           "the trained turn" in said
    assert "the template's generation prompt ends with '<｜Assistant｜><think>\\n', which the conversation never " \
           "contains: it writes '<｜Assistant｜>Hi, how can I help?" in said
    assert ADVICE in said
    # The assistant-first conversation: v1 renders no empty prompt.
    assert found["no_prompt"] == 1 and "the trained turn is the conversation's first message" in said
    info = CliRunner().invoke(cli, ["info", str(store)])
    assert info.exit_code == 0 and "why" in info.output
    assert f"{found['generation_prompt']:>11,}  the template's generation prompt" in info.output


def test_template_refusals_are_grouped_by_the_templates_own_words(store: Path) -> None:
    gemma, mistral = causes(store, "gemma2"), causes(store, "mistral_nemo")
    assert gemma["template: System role not supported"] >= 3
    assert gemma["template: Conversation roles must alternate user/assistant/user/assistant/..."] >= 1
    assert "the template refused it: System role not supported" in store.with_name("gemma2.txt").read_text()
    # Mistral Nemo writes the system prompt into the last user turn: the earlier text changes.
    assert mistral["rewrites_turns"] >= 1
    assert mistral["template: Tool call IDs should be alphanumeric strings with length 9!"] >= 1
    said = store.with_name("mistral_nemo.txt").read_text()
    assert "the template writes earlier turns differently once a later turn is added" in said
    assert "'You are terse.\\n\\nName a prime.[/INST]' becomes 'Name a prime.[/INST]7.</s>'" in said


@pytest.mark.slow
def test_the_report_shows_the_causes_in_a_browser_and_in_its_json(store: Path, browser, tmp_path: Path) -> None:
    html_path = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(store), "-o", str(html_path), "--spec", "gemma2"])
    assert result.exit_code == 0, result.output
    page = browser.new_page()
    page.goto(html_path.as_uri())
    table = page.locator("#causes + p + table")
    assert table.is_visible()
    rows = table.locator("tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert any("the template refused it: System role not supported" in text and ADVICE in text for text in texts)
    page.close()
    document = CliRunner().invoke(cli, ["report", str(store), "--json", "--spec", "gemma2"])
    assert document.exit_code == 0, document.output
    found = {c["cause"]: c for c in json.loads(document.output)["spec"]["causes"]}
    system = found["template: System role not supported"]
    assert system["advice"] == ADVICE and system["example"]["dataset"] == "handmade"
    assert system["entries"] == causes(store, "gemma2")["template: System role not supported"]


def test_a_template_that_wants_other_tool_shapes_says_what_it_wanted(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(build_tokenizer("qwen2_5", tmp_path / "qwen"))
    # As DeepSeek's templates write a call: its arguments joined to text, so they must be a JSON string.
    joins = ("{% for m in messages %}{{ m.content }}{% for c in m.tool_calls or [] %}"
             "{{ '```json\\n' + c.function.arguments + '\\n```' }}{% endfor %}{% endfor %}"
             "{% for t in tools or [] %}{{ t.function.name }}{% endfor %}")
    renderer = Renderer(tokenizer, joins, cutoff=4096)
    entry = [user("Weather?"), call("get_weather", {"city": "Paris"})]
    rendered = renderer.render({"messages": entry}, has_cut=True)
    assert rendered.status == "render_error" and rendered.cause == "string_arguments"
    assert "wants them as a JSON string; the data holds JSON objects" in rendered.detail
    schemas = json.dumps([{"name": "get_weather", "parameters": {"type": "object"}}])  # glaive's bare schemas
    rendered = renderer.render({"messages": [user("Weather?"), call("get_weather", '{"city": "Paris"}')],
                                "tools": schemas}, has_cut=True)
    assert rendered.status == "render_error" and rendered.cause == "tool_shape"


def test_compose_with_a_spec_says_why_its_entries_do_not_train(store: Path) -> None:
    result = CliRunner().invoke(cli, ["compose", str(store), "--spec", "gemma2"])
    assert result.exit_code == 0, result.output
    system = causes(store, "gemma2")["template: System role not supported"]
    assert f"{system:>11,}  the template refused it: System role not supported" in result.output
    assert ADVICE in result.output


@pytest.mark.slow
def test_compose_of_a_mixture_says_why_only_its_own_datasets_entries_do_not_train(tmp_path: Path) -> None:
    """A spec covers every base entry; compose --mixture names the causes of the datasets the
    mixture draws from, not of one it leaves out (whose long rows the cutoff drops)."""
    from .helpers import alpaca_rows, train_tokenizer, write_yaml

    short, long = write_jsonl(tmp_path / "short.jsonl", alpaca_rows(20)), tmp_path / "long.jsonl"
    rows = alpaca_rows(10)
    for row in rows[:4]:
        row["output"] = " ".join(["words"] * 200)
    write_jsonl(long, rows)
    both = write_yaml(tmp_path / "both.yaml", f"short:\n  path: {short}\n  source: local\n  converter: alpaca\n"
                                              f"long:\n  path: {long}\n  source: local\n  converter: alpaca\n")
    only_short = write_yaml(tmp_path / "short.yaml", both.read_text() + "  size: 0\n")
    store = tmp_path / "s.db"
    build(both, store)
    train_tokenizer(tmp_path / "tokenizer")
    runner = CliRunner()
    for args in (["mix", str(store), str(only_short), "--name", "short_only"],
                 ["render", str(store), "--tokenizer", str(tmp_path / "tokenizer"), "--template", "chatml",
                  "--cutoff", "64"]):
        assert runner.invoke(cli, args).exit_code == 0
    every = runner.invoke(cli, ["compose", str(store), "--spec", "default"])
    assert "why 4 entries of spec 'default' in the datasets of mixture 'default' do not train:" in every.output
    assert "e.g. long row 0" in every.output
    alone = runner.invoke(cli, ["compose", str(store), "--mixture", "short_only", "--spec", "default"])
    assert alone.exit_code == 0, alone.output
    assert "do not train" not in alone.output and "long" not in alone.output

"""dataidx report, looked at the way people see it: in headless Chromium (Debian's, driven by
Playwright; nothing is downloaded), charts counted against SQL, tokens hovered; and dataidx
serve, read over HTTP from a running Datasette."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.pack import pack_store
from dataidx.render import RenderRequest, render_store
from dataidx.store import run_query
from dataidx.view import COOKBOOK, DESCRIPTIONS, VIEWS, datasette_metadata, split_characters, token_texts, write_report

from .helpers import REPO, alpaca_rows, write_jsonl

SCREENSHOT = REPO / "docs" / "report.png"


@pytest.fixture(scope="module")
def rendered_demo(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's demo: built, rendered with the shipped tokenizer (cutoff 256: some entries are
    too long) and packed."""
    store = Path(shutil.copyfile(demo_store, tmp_path_factory.mktemp("report") / "demo.db"))
    render_store(RenderRequest(store, REPO / "data" / "demo_tokenizer", cutoff=256))
    pack_store(store, "default", capacity=256)
    return store


@pytest.fixture(scope="module")
def report(rendered_demo: Path) -> Path:
    result = CliRunner().invoke(cli, ["report", str(rendered_demo), "-o", str(rendered_demo.with_name("report.html")),
                                      "--spec", "default", "--plan", "default", "--samples", "4"])
    assert result.exit_code == 0, result.output
    assert "report steps 6/6" in result.output and "wrote" in result.output
    return rendered_demo.with_name("report.html")


def sql_count(store: Path, sql: str) -> int:
    return run_query(store, sql)[1][0][0]


def test_the_report_is_one_self_contained_file(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "</html>" in text
    for fetch in ("<script src", "<link", "url(http", "src=\"http", "src='http", "@import"):
        assert fetch not in text
    assert text.count("<svg") == 5  # mixture, turns, lengths, supervised, fill


@pytest.mark.slow
def test_the_report_in_a_browser(report: Path, rendered_demo: Path, browser, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: problems.append(f"fetched {request.url}")
            if not request.url.startswith("file:") else None)
    page.goto(report.as_uri())
    width = int(page.get_attribute("#chart-lengths", "data-bin-width"))
    expected = {  # every chart counts the mixture's positions
        "mixture": sql_count(rendered_demo, "SELECT count(*) FROM composition WHERE mixture = 'default'"),
        "turns": sql_count(rendered_demo,
                           "SELECT count(*) FROM (SELECT DISTINCT t.dataset, t.entries FROM turns AS t "
                           "JOIN (SELECT DISTINCT dataset, row FROM entries WHERE mixture = 'default') AS r "
                           "ON r.dataset = t.dataset AND r.row = t.row) AS t"),
        "lengths": sql_count(rendered_demo,
                             f"SELECT count(*) FROM (SELECT DISTINCT l.dataset, l.status, l.full_tokens / {width} "
                             "FROM entries AS e JOIN entry_lengths AS l ON l.spec = 'default' "
                             "AND l.dataset = e.dataset AND l.row = e.row AND l.cut IS e.cut "
                             "WHERE e.mixture = 'default') AS t"),
        "supervised": sql_count(rendered_demo,
                                "SELECT count(DISTINCT dataset) FROM entry_lengths WHERE spec = 'default' "
                                "AND status IN ('ok', 'truncated')"),
        "fill": sql_count(rendered_demo, "SELECT count(*) FROM (SELECT DISTINCT min(sum(tokens) * 20 / 256, 19) "
                                      "FROM pack_members WHERE plan = 'default' GROUP BY pack) AS t"),
    }
    drawn = {chart: page.locator(f"#chart-{chart} [id^='mark-{chart}-']").count() for chart in expected}
    assert drawn == expected and all(drawn.values())
    for chart in expected:  # each mark is an SVG shape the browser laid out, not an empty group
        box = page.locator(f"#chart-{chart} [id='mark-{chart}-0'] path").first.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0, chart
    # Hovering a supervised token shows its label; an unsupervised one says it is not trained on.
    trained = page.locator("#samples .tok.sup").first
    trained.hover()
    assert page.is_visible("#tip")
    assert f"label {trained.get_attribute('data-label')}" in page.inner_text("#tip")
    page.locator("#samples .sample:not(.untrained) .tok:not(.sup)").first.hover()
    assert "label -100 (not trained on)" in page.inner_text("#tip")
    assert page.locator("#samples .tok.special").count() > 0
    assert "too_long" in page.inner_text("#lengths")  # the entries that will not train, with why
    assert not problems, problems
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    if os.environ.get("DATAIDX_UPDATE_SCREENSHOT"):  # the README's picture: lengths by status, and why
        page.mouse.move(0, 0)
        top = page.locator("#lengths").bounding_box()["y"] + page.evaluate("window.scrollY")
        page.screenshot(path=str(SCREENSHOT), full_page=True, clip={"x": 0, "y": top, "width": 1000, "height": 980})
    page.close()


def test_report_without_a_spec_and_its_errors(rendered_demo: Path, tmp_path: Path) -> None:
    summary = write_report(rendered_demo, tmp_path / "plain.html", samples=2, seed=3)
    text = summary.path.read_text(encoding="utf-8")
    assert summary.bytes == len(text.encode()) and "converted (no --spec given)" in text
    assert text.count("<svg") == 2 and "id='chart-lengths'" not in text
    result = CliRunner().invoke(cli, ["report", str(rendered_demo), "-o", str(tmp_path / "x.html"), "--spec", "nope"])
    assert result.exit_code == 1 and "render spec 'nope'" in result.output and "default" in result.output
    result = CliRunner().invoke(cli, ["report", str(rendered_demo), "-o", str(tmp_path / "x.html"),
                                      "--mixture", "nope"])
    assert result.exit_code == 1 and "mixture 'nope'" in result.output
    assert not (tmp_path / "x.html").exists()


def test_dataset_names_are_drawn_as_text(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"q{i}", "input": "", "output": "a"}) + "\n" for i in range(5)))
    (tmp_path / "c.yaml").write_text(f"'cost_$5_to_$ <b>&':\n  path: {data}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "c.yaml", tmp_path / "s.db")
    text = write_report(tmp_path / "s.db", tmp_path / "r.html", samples=1).path.read_text(encoding="utf-8")
    assert "cost_$5_to_$ &lt;b&gt;&amp;" in text and "<b>&" not in text


def test_datasette_metadata_describes_every_table_and_view(rendered_demo: Path) -> None:
    _, names = run_query(rendered_demo, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    assert {name for name, in names} == set(DESCRIPTIONS)
    queries = datasette_metadata("demo")["databases"]["demo"]["queries"]
    assert len(queries) == len(COOKBOOK) and all(query["sql"] for query in queries.values())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_serve_shows_the_store_in_datasette(rendered_demo: Path) -> None:
    pytest.importorskip("datasette")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "dataidx", "serve", str(rendered_demo), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}/demo"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/composition.json?_shape=objects", timeout=5) as response:
                    composition = json.load(response)
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "datasette did not start"
                time.sleep(0.3)
        _, expected = run_query(rendered_demo, "SELECT dataset, entries FROM composition WHERE mixture = 'default'")
        assert [(row["dataset"], row["entries"]) for row in composition["rows"]] == [tuple(row) for row in expected]
        with urllib.request.urlopen(f"{base}/share_of_each_dataset_in_a_mixture.json?_shape=array",
                                    timeout=5) as response:
            shares = json.load(response)
        assert [row["dataset"] for row in shares] == [dataset for dataset, _ in expected]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/metadata.json", timeout=5) as response:
            described = json.load(response)["databases"]["demo"]["tables"]
        assert described["entries"]["description"] == DESCRIPTIONS["entries"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:  # the views first
            home = response.read().decode()
        links = re.findall(r"href='/demo/(\w+)'", home)
        assert links[: len(VIEWS)] == list(VIEWS) and set(VIEWS) <= set(DESCRIPTIONS)
        with pytest.raises(urllib.error.HTTPError):  # read-only: Datasette refuses anything but a read
            urllib.request.urlopen(f"{base}.json?sql=DELETE+FROM+datasets", timeout=5)
        assert run_query(rendered_demo, "SELECT count(*) FROM datasets")[1][0][0] == 3
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    # The refused write is one line in the terminal, not a traceback with its locals.
    assert "Traceback" not in output and "locals" not in output, output
    refused = [line for line in output.splitlines() if "refused" in line]
    assert refused == ["dataidx serve: refused GET /demo.json?sql=DELETE+FROM+datasets (400): "
                       "Statement must be a SELECT"], output


def test_serve_on_a_busy_port_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("datasette")
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    (tmp_path / "c.yaml").write_text(f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "c.yaml", tmp_path / "s.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "dataidx", "serve", str(tmp_path / "s.db"), "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: port {port} on 127.0.0.1 is in use; choose another with --port\n"


def test_serve_refuses_what_is_not_a_store_file(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database")
    for store, message in ((tmp_path / "none.db", "store not found"), (tmp_path / "notes.db", "not a dataidx store"),
                           ("postgresql://me:secret@db/x?schema=s", "shows a store file")):
        result = CliRunner().invoke(cli, ["serve", str(store)])
        assert result.exit_code == 1 and message in result.output and "serving" not in result.output
        assert "secret" not in result.output


CHINESE = ["中文怎么说", "你好，世界", "数据集"]


@pytest.mark.slow
def test_chinese_text_is_drawn_whole_in_a_browser(browser, tmp_path: Path) -> None:
    """A byte-level BPE (the demo tokenizer) splits a Chinese character's three bytes across
    tokens; the page draws each character once, in its first token's box, keeps one box per
    token, and shows no U+FFFD. An entry that does not train is grey, with nothing green."""
    rows = [{"instruction": f"{CHINESE[i % 3]}？第{i}题", "input": "", "output": f"答：{CHINESE[(i + 1) % 3]}。"
             + ("很长的回答。" * 60 if i == 0 else "")} for i in range(6)]
    data = write_jsonl(tmp_path / "zh.jsonl", rows)
    (tmp_path / "c.yaml").write_text(f"zh:\n  path: {data}\n  source: local\n  converter: alpaca\n", encoding="utf-8")
    build(tmp_path / "c.yaml", tmp_path / "zh.db")
    render_store(RenderRequest(tmp_path / "zh.db", REPO / "data" / "demo_tokenizer", cutoff=200))
    write_report(tmp_path / "zh.db", tmp_path / "zh.html", spec="default", samples=6)
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.goto((tmp_path / "zh.html").as_uri())
    text = page.inner_text("#samples")
    assert "\ufffd" not in text and "\\x" not in text
    for phrase in CHINESE:
        assert phrase in text.replace("\n", "")
    _, lengths = run_query(tmp_path / "zh.db", "SELECT tokens, status FROM entry_lengths ORDER BY row")
    boxes = page.locator("#samples .sample .tokens").evaluate_all(
        "all => all.map(t => t.querySelectorAll('.tok').length)")
    # One box per token, continued or not, up to the cutoff: the rest of a long entry is counted, not drawn.
    assert sorted(boxes) == sorted(min(tokens, 200) for tokens, _ in lengths)
    assert "939 more tokens not shown (past the cutoff)" in text
    assert page.locator("#samples .tok.cont").count() > 0
    assert page.locator("#samples .tok.cont").evaluate_all("all => all.every(t => t.textContent === '')")
    untrained = page.locator("#samples .sample.untrained")
    assert untrained.count() == sum(status != "ok" for _, status in lengths) == 1
    assert untrained.locator(".tok.sup").count() == 0 and "does not train" in untrained.inner_text()
    page.locator("#samples .sample").nth(1).screenshot(path=str(tmp_path / "zh.png"))
    page.close()


class BytesTokenizer:
    """A tokenizer that is not byte-level BPE: one token per byte, decoded as HF decodes, with U+FFFD."""

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", "replace")


def test_a_character_is_drawn_in_the_box_of_its_first_byte() -> None:
    # 中 is e4 b8 ad, 文 e6 96 87: a token may end one character and start the next.
    assert split_characters([b"\xe4\xb8", b"\xad\xe6\x96", b"\x87", b"a", b"", b"\xe4"]) == \
        ["中", "文", None, "a", "", "\\xe4"]  # a byte cut off by truncation is shown as its value, not U+FFFD
    # Any other tokenizer: decoded incrementally, the text drawn in the first box of the tokens it took.
    assert token_texts(BytesTokenizer(), list("中a文".encode())) == ["中", None, None, "a", "文", None, None]


def test_count_axes_have_integer_ticks_and_details_collapse_the_list(tmp_path: Path, tiny_tokenizer: Path) -> None:
    """A dataset of three one-turn rows: no 0.6 .. 1.4 axis around the one turn count, no 0.25
    steps on a count of two; the entries that do not train are listed inside <details>."""
    rows = [{"instruction": "q", "input": "", "output": "answer " * (60 if i == 0 else 1)} for i in range(3)]
    data = write_jsonl(tmp_path / "a.jsonl", rows)
    (tmp_path / "c.yaml").write_text(f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "c.yaml", tmp_path / "s.db")
    render_store(RenderRequest(tmp_path / "s.db", tiny_tokenizer, cutoff=40))
    pack_store(tmp_path / "s.db", "default", capacity=64)
    page = write_report(tmp_path / "s.db", tmp_path / "r.html", spec="default", plan="default", samples=0).path
    text = page.read_text(encoding="utf-8")
    ticks = re.findall(r"<text[^>]*>\s*([-\d.,]+)\s*</text>", text)
    assert ticks and not [tick for tick in ticks if "." in tick], ticks
    assert re.search(r"<details><summary>1 distinct entries \(1 positions\) do not train", text)

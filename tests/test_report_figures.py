"""dataidx report's figures held to SQL: every figure counts the mixture's positions (of every
epoch, or of --epoch K), and `report --json` gives them as data, compared here with independent
SQL over the views of docs/sql.md. Errors are one line and exit 1, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import RenderRequest, render_store
from dataidx.store import run_query

from .helpers import chat_rows, write_jsonl

pytestmark = pytest.mark.slow  # the CLI in a process of its own


def dataidx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataidx", *args], capture_output=True, text=True, timeout=300)


def config(folder: Path, budgets: bool) -> str:
    qa = [{"instruction": f"问题 {i}: 中文怎么说?", "input": "",
           "output": ("答案 " + "word " * (70 if i % 4 == 0 else 3))}
          for i in range(12)]
    chats = write_jsonl(folder / "chat.jsonl",
                        [{"conversations": c["conversations"]} for c in chat_rows([1, 3, 2, 1, 2])])
    qa_file = write_jsonl(folder / "qa.jsonl", qa)
    sizes = ("  tokens: 300\n", "  supervised_tokens: 40\n") if budgets else ("  size: 9\n", "  weight: 2.0\n")
    return (f"qa:\n  path: {qa_file}\n  source: local\n  converter: alpaca\n{sizes[0]}"
            f"chat:\n  path: {chats}\n  source: local\n  converter: sharegpt\n{sizes[1]}")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    """A store whose default mixture has size and weight, rendered (some entries too long), with
    a mixture 'three' of 3 epochs drawn by token budgets and a plan of each."""
    folder = tmp_path_factory.mktemp("figures")
    (folder / "sizes.yaml").write_text(config(folder, budgets=False), encoding="utf-8")
    (folder / "budgets.yaml").write_text(config(folder, budgets=True), encoding="utf-8")
    store = folder / "s.db"
    build(folder / "sizes.yaml", store)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=120))
    runner = CliRunner()
    for args in (["mix", str(store), str(folder / "budgets.yaml"), "--name", "three", "--spec", "default",
                  "--epochs", "3"],
                 ["pack", str(store), "--spec", "default", "--capacity", "256"],
                 ["pack", str(store), "--spec", "default", "--capacity", "256", "--mixture", "three", "--name", "p3"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
    return store


def rows(store: Path, sql: str, *parameters) -> list[tuple]:
    return sorted(tuple(row) for row in run_query(store, sql, list(parameters))[1])


def test_report_of_a_mixture_of_several_epochs(store: Path, tmp_path: Path) -> None:
    """Issue 23 item 8: the sampled positions were drawn over all epochs and read from epoch 0."""
    done = dataidx("report", str(store), "--mixture", "three", "--spec", "default", "--plan", "p3", "--samples", "40",
                   "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"wrote {tmp_path / 'r.html'} (")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "epoch 2 · position" in page and "IndexError" not in page
    done = dataidx("report", str(store), "--mixture", "three", "--epoch", "1", "--samples", "3",
                   "-o", str(tmp_path / "e.html"))
    assert done.returncode == 0, done.stderr
    assert "epoch 1 · position" in (tmp_path / "e.html").read_text(encoding="utf-8")


def where(epoch: int | None) -> str:
    return "" if epoch is None else f" AND e.epoch = {epoch}"


@pytest.mark.parametrize(("mixture", "plan", "epoch"), [("default", "default", None), ("three", "p3", None),
                                                        ("three", "p3", 1)])
def test_report_json_is_the_sql_of_the_positions(store: Path, mixture: str, plan: str, epoch: int | None) -> None:
    """Issue 23 item 9: the figures count the mixture's positions (size, weight, budgets, epochs),
    not the base datasets; `report --json` prints them, one JSON document on stdout."""
    args = ["report", str(store), "--mixture", mixture, "--spec", "default", "--plan", plan, "--json"]
    done = dataidx(*args, *(() if epoch is None else ("--epoch", str(epoch))))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    figures = json.loads(done.stdout)  # exactly one document: json.loads refuses anything after it
    assert (figures["mixture"], figures["epoch"]) == (mixture, epoch) and "<" not in done.stdout[:1]
    positions = f"FROM entries AS e WHERE e.mixture = ?{where(epoch)}"
    joined = (f"FROM entries AS e JOIN entry_lengths AS l ON l.spec = 'default' AND l.dataset = e.dataset "
              f"AND l.row = e.row AND l.cut IS e.cut WHERE e.mixture = ?{where(epoch)}")
    assert figures["positions"] == rows(store, f"SELECT count(*) {positions}", mixture)[0][0]
    assert sorted((r["dataset"], r["entries"]) for r in figures["composition"]) == \
        rows(store, f"SELECT e.dataset, count(*) {positions} GROUP BY e.dataset", mixture)
    spec = figures["spec"]
    assert sorted(tuple(r.values()) for r in spec["supervised"]) == rows(
        store, f"SELECT e.dataset, count(*), sum(l.tokens), sum(l.supervised_tokens) {joined} "
               "AND l.status IN ('ok', 'truncated') GROUP BY e.dataset", mixture)
    assert sorted(tuple(r.values()) for r in spec["lengths"]) == rows(
        store, f"SELECT e.dataset, l.status, l.full_tokens / {spec['bin_width']}, count(*) {joined} GROUP BY 1, 2, 3",
        mixture)
    not_training = spec["not_training"]
    assert sorted((r["dataset"], r["status"], r["positions"]) for r in not_training["reasons"]) == rows(
        store, f"SELECT e.dataset, l.status, count(*) {joined} AND l.status NOT IN ('ok', 'truncated') GROUP BY 1, 2",
        mixture)
    assert not_training["positions"] > 0 or mixture == "three"  # a budget draws only entries that train
    assert not_training["entries"] == rows(
        store, f"SELECT count(*) FROM (SELECT DISTINCT e.dataset, e.row, e.cut {joined} "
               "AND l.status NOT IN ('ok', 'truncated')) AS t", mixture)[0][0]
    assert sorted(tuple(r.values()) for r in spec["by_epoch"]) == rows(
        store, f"SELECT e.epoch, e.dataset, count(*), sum(l.status IN ('ok', 'truncated')), "
               "sum(CASE WHEN l.status IN ('ok', 'truncated') THEN l.tokens ELSE 0 END), "
               f"sum(CASE WHEN l.status IN ('ok', 'truncated') THEN l.supervised_tokens ELSE 0 END) {joined} "
               "GROUP BY 1, 2", mixture)
    assert sorted(tuple(r.values()) for r in figures["turns"]) == rows(
        store, f"SELECT t.dataset, t.entries, count(*) FROM (SELECT DISTINCT e.dataset, e.row {positions}) AS r "
               "JOIN turns AS t ON t.dataset = r.dataset AND t.row = r.row GROUP BY 1, 2", mixture)
    assert sorted((r["dataset"], r["size"], r["weight"], r["token_budget"], r["supervised_token_budget"])
                  for r in figures["draws"]) == rows(
        store, "SELECT d.name, md.size, md.weight, md.token_budget, md.supervised_token_budget FROM mixture_datasets "
               "AS md JOIN datasets AS d ON d.id = md.dataset_id JOIN mixtures AS m ON m.id = md.mixture_id "
               "WHERE m.name = ?", mixture)
    assert sorted((r["epoch"], r["dataset"], r["entries"], r["tokens"]) for r in figures["epoch_draws"]) == rows(
        store, "SELECT ed.epoch, d.name, ed.entries, ed.tokens FROM epoch_datasets AS ed JOIN datasets AS d "
               "ON d.id = ed.dataset_id JOIN mixtures AS m ON m.id = ed.mixture_id WHERE m.name = ?"
               + ("" if epoch is None else f" AND ed.epoch = {epoch}"), mixture)
    capacity = figures["plan"]["capacity"]
    assert sorted(tuple(r.values()) for r in figures["plan"]["fill_histogram"]) == rows(
        store, f"SELECT bin, count(*) FROM (SELECT min(sum(tokens) * 20 / {capacity}, 19) AS bin FROM pack_members "
               f"WHERE plan = ?{'' if epoch is None else f' AND epoch = {epoch}'} GROUP BY epoch, pack) AS t "
               "GROUP BY bin",
        plan)
    # The same numbers dataidx compose prints for the mixture.
    composed = json.loads(dataidx("compose", str(store), "--mixture", mixture, "--spec", "default", "--json",
                                  *(() if epoch is None else ("--epoch", str(epoch)))).stdout)
    assert sorted((r["dataset"], r["training_entries"], r["tokens"], r["supervised_tokens"]) for r in composed) == \
        sorted(tuple(r.values()) for r in spec["supervised"])


def test_report_refuses_a_plan_of_another_mixture_and_an_epoch_it_lacks(store: Path, tmp_path: Path) -> None:
    output = tmp_path / "r.html"
    done = dataidx("report", str(store), "--mixture", "three", "--spec", "default", "--plan", "default",
                   "-o", str(output))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("Error: packing plan 'default' packs mixture 'default', not 'three': "
                           "pass --mixture default, or a plan of mixture 'three'\n")
    done = dataidx("report", str(store), "--mixture", "three", "--epoch", "3", "--json")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("Error: mixture 'three' has epochs 0-2, not epoch 3 "
                           "(dataidx mix --epochs N stores more)\n")
    assert not output.exists()

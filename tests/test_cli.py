"""The dataidx CLI: the README's commands, read-only query, one-line errors, help examples."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli

from .helpers import REPO, alpaca_rows, write_jsonl, write_yaml


def run(*args: str) -> click.testing.Result:  # noqa: F821
    return CliRunner().invoke(cli, list(args))


def test_build_prints_a_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run("build", "data/demo_sft.yaml", "-o", str(tmp_path / "d.db"), "--seed", "3")
    assert result.exit_code == 0
    assert "demo_sharegpt  5     11       22" in result.stderr
    assert "mixture 'default' of 37 entries (seed 3, exact)" in result.stderr
    quiet = run("build", "data/demo_sft.yaml", "-o", str(tmp_path / "q.db"), "-q")
    assert quiet.exit_code == 0 and quiet.output == ""


def test_info_text_and_json(demo_store: Path) -> None:
    text = run("info", str(demo_store))
    assert text.exit_code == 0
    assert "mixture 'default': 37 entries, seed 42, exact sampling" in text.output
    document = json.loads(run("info", str(demo_store), "--json").output)
    assert [d["name"] for d in document["datasets"]] == ["demo_alpaca", "demo_sharegpt", "demo_messages"]
    assert [d["entries"] for d in document["datasets"]] == [12, 11, 5]
    assert document["mixtures"][0]["datasets"]["demo_messages"]["entries"] == 3


def test_show_prints_what_the_engine_returns(demo_store: Path) -> None:
    result = run("show", str(demo_store), "0", "5", "-1")
    assert result.exit_code == 0, result.output
    with DataEngine(demo_store) as engine:
        assert [json.loads(line) for line in result.output.splitlines()] == [engine[0], engine[5], engine[-1]]
        other = run("show", str(demo_store), "1", "--mixture", "nope")
        assert other.exit_code == 1 and "no mixture 'nope'" in other.stderr
        far = run("show", str(demo_store), "37")
        assert far.exit_code == 1 and "position 37 out of range" in far.stderr


def test_query_table_and_json(demo_store: Path) -> None:
    sql = "SELECT dataset, count(*) AS n FROM entries GROUP BY dataset ORDER BY dataset"
    assert json.loads(run("query", str(demo_store), sql, "--json").output) == [
        {"dataset": "demo_alpaca", "n": 12}, {"dataset": "demo_messages", "n": 3}, {"dataset": "demo_sharegpt", "n": 22}
    ]
    table = run("query", str(demo_store), sql).output.splitlines()
    assert table[0].split() == ["dataset", "n"] and table[2].split() == ["demo_alpaca", "12"]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM base_entries",
        "UPDATE mixtures SET seed = 1",
        "INSERT INTO builds (created_at) VALUES ('x')",
        "DROP VIEW entries",
        "CREATE TABLE t (x)",
        "ATTACH DATABASE 'other.db' AS other",
        "PRAGMA journal_mode = WAL",
        "PRAGMA query_only = OFF",
        "SELECT 1; DELETE FROM base_entries",
        "VACUUM",
        "WITH x AS (SELECT 1) DELETE FROM base_entries",
    ],
)
def test_query_can_never_change_the_store(demo_copy: Path, sql: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = hashlib.sha256(demo_copy.read_bytes()).hexdigest()
    result = run("query", str(demo_copy), sql)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: query ") and result.stderr.count("\n") == 1
    assert hashlib.sha256(demo_copy.read_bytes()).hexdigest() == before
    assert not (tmp_path / "other.db").exists()


def test_user_mistakes_are_one_line_and_exit_1(tmp_path: Path) -> None:
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("hello")
    cases = [
        (["info", str(tmp_path / "absent.db")], "store not found"),
        (["info", str(not_a_store)], "not a dataidx store (not a SQLite file)"),
        (["build", str(tmp_path / "absent.yaml"), "-o", str(tmp_path / "x.db")], "config file not found"),
        (["query", str(tmp_path / "absent.db"), "SELECT 1"], "store not found"),
    ]
    cases.append((["build", str(REPO / "data" / "demo_sft.yaml"), "-o", str(tmp_path / "no" / "x.db")],
                  f"folder {tmp_path / 'no'} does not exist"))
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(2))
    bad = write_yaml(tmp_path / "bad.yaml", f"a:\n  path: {data}\n  converter: nope\n  size: -1\n")
    cases.append((["build", str(bad), "-o", str(tmp_path / "x.db")],
                  "2 problems: dataset 'a': key 'converter': unknown converter 'nope'"))
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 1, args
        assert message in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_python_dash_m_and_console_script(demo_store: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "dataidx", "query", str(demo_store), "SELECT count(*) FROM entries"],
                            capture_output=True, text=True, env=os.environ.copy())
    assert result.returncode == 0 and result.stdout.splitlines()[-1].strip() == "37"
    script = Path(sys.executable).with_name("dataidx")
    result = subprocess.run([str(script), "info", str(demo_store), "--json"], capture_output=True, text=True)
    assert result.returncode == 0 and json.loads(result.stdout)["mixtures"][0]["entries"] == 37


def test_every_command_has_help_with_an_example_under_h_and_help() -> None:
    assert [name for name, command in cli.commands.items() if not command.help] == []
    for name in [None, *cli.commands]:
        for flag in ("-h", "--help"):
            result = run(*([name] if name else []), flag)
            assert result.exit_code == 0, (name, flag, result.output)
            assert "Example:" in result.output and "dataidx " in result.output.split("Example:")[1], (name, flag)

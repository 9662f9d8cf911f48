"""Crafted stores and statements (issue 50): whatever a store file holds and whatever SQL a user
or a web page sends, a read costs bounded time and memory and ends in one line."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli


def run(*args: object):  # click's Result
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def one_line_error(result, *fragments: str) -> None:
    """A refusal as the README promises it: exit 1, one line on stderr, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def crafted(store: Path, *statements: str) -> Path:
    """``store`` changed behind dataidx's back with plain sqlite3, as a hostile file would be."""
    with sqlite3.connect(store) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    return store


# Item 16: one line instead of a traceback or a wrong word.

def test_a_store_recording_two_schema_revisions_is_one_line_for_migrate_and_every_read(demo_copy: Path) -> None:
    crafted(demo_copy, "DELETE FROM alembic_version", "INSERT INTO alembic_version VALUES ('0014'), ('0015')")
    before = demo_copy.read_bytes()
    said = "alembic_version records more than one schema revision ('0014', '0015')"
    one_line_error(run("migrate", demo_copy), f"{demo_copy}: {said}")  # a 79-line Alembic traceback before
    one_line_error(run("info", demo_copy), said)
    assert demo_copy.read_bytes() == before


def test_an_empty_schema_key_in_a_postgresql_url_is_refused_not_read_as_the_default_schema() -> None:
    from dataidx.errors import StoreError
    from dataidx.store.location import store_location

    for url in ("postgresql://me@db/training?schema=", "postgresql://me@db/training?sslmode=disable&schema"):
        with pytest.raises(StoreError, match=r"\?schema= names no schema"):
            store_location(url)  # schema 'dataidx' before: another store than the one meant
    one_line_error(run("info", "postgresql://me:pw@db/training?schema="), "me:***@db", "names no schema")
    assert store_location("postgresql://me@db/training").schema == "dataidx"  # the key left out


def test_a_store_stamped_newest_without_length_chunks_is_one_line_for_verify_and_mix(
        demo_copy: Path, tiny_tokenizer: Path) -> None:
    from .helpers import REPO

    assert run("render", demo_copy, "--tokenizer", tiny_tokenizer, "--cutoff", "256", "-q").exit_code == 0
    crafted(demo_copy, "DROP TABLE length_chunks")
    missing = f"{demo_copy}: table 'length_chunks' is missing: the store was altered; rebuild it"
    one_line_error(run("verify", demo_copy), missing)  # both tracebacks before
    one_line_error(run("mix", demo_copy, REPO / "data" / "demo_budgets.yaml", "--name", "b", "--spec", "default"),
                   missing)


# Item 13: a table or view of the schema replaced by another object.

#: A view that never finishes: a recursive CTE without a bound, filtered to nothing.
FOREVER_ROWS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT {columns} FROM r WHERE x < 0"
#: ``mixtures`` (a table every command reads) made a view of its columns that never answers.
MIXTURES_VIEW = "CREATE VIEW mixtures AS " + FOREVER_ROWS.format(columns=(
    "1 AS id, 'default' AS name, 0 AS seed, 'exact' AS sampling, 1 AS start, 37 AS entries, '' AS config_sha256, "
    "'' AS dataidx_version, '' AS created_at, '' AS config_text, 1 AS epochs, NULL AS spec, NULL AS spec_fingerprint"))
#: ``pack_plans`` with the documented columns that never answers.
PACK_PLANS_VIEW = "CREATE VIEW pack_plans AS " + FOREVER_ROWS.format(columns=(
    "'p' AS plan, 's' AS spec, 'm' AS mixture, 8 AS capacity, 0 AS seed, 0 AS packs, 0 AS entries, 0.0 AS fill, "
    "0 AS tokens, 0 AS left_out"))


def cli_process(*args: object, timeout: float = 120):
    """The CLI in a process of its own, given ``timeout`` seconds: what a hang fails with."""
    import subprocess
    import sys

    script = "import sys; from dataidx.cli import main; sys.argv = ['dataidx', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def refused_in_one_line(found, *fragments: str) -> None:
    assert found.returncode == 1 and found.stderr.count("\n") == 1, found.stderr
    assert "Traceback" not in found.stderr and all(fragment in found.stderr for fragment in fragments), found.stderr


@pytest.mark.slow
def test_a_table_or_view_replaced_by_a_view_is_refused_on_open_instead_of_read_until_ctrl_c(
        demo_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataidx import DataEngine
    from dataidx.errors import StoreError

    from .helpers import REPO

    table = tmp_path / "table.db"
    table.write_bytes(demo_copy.read_bytes())
    crafted(table, "DROP TABLE mixtures", MIXTURES_VIEW)
    view = crafted(demo_copy, "DROP VIEW pack_plans", PACK_PLANS_VIEW)
    replaced, altered = "view 'mixtures' in place of the table", "view 'pack_plans' differs from the schema"
    for store, said in ((table, replaced), (view, altered)):
        # Each ran until Ctrl-C (the read deadline is 10 minutes), or answered from the view.
        refused_in_one_line(cli_process("info", store), f"{store}: {said}: the store was altered; rebuild it")
        refused_in_one_line(cli_process("report", store, "--plan", "default", "-o", tmp_path / "r.html"), said)
    refused_in_one_line(cli_process("show", table, "0"), replaced)
    before = table.read_bytes()
    refused_in_one_line(cli_process("mix", table, REPO / "data" / "demo_sft.yaml", "--name", "m"), replaced)
    assert table.read_bytes() == before and not (tmp_path / "r.html").exists()
    monkeypatch.setattr("dataidx.store.sqlite.read.READ_SECONDS", 30.0)  # what the engine ran into before
    with pytest.raises(StoreError, match=replaced):
        DataEngine(table)

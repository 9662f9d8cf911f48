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

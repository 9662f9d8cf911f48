"""The objects a store file may hold: its revision's tables, indexes and views, and no triggers.

A store is a file anyone can edit. A trigger added to it fires inside dataidx's own writes (one
on ``mixture_positions`` can make ``mix`` store one sample 37 times while it prints the counts it
meant), and a view replaced by another changes what every command reads. No dataidx schema has a
trigger, so writes drop any they find; a view of ours that reads otherwise is refused; ``verify``
names every object that is not the schema's.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from ...errors import StoreError

Execute = Callable[[str], Sequence[Any]]
logger = logging.getLogger(__name__)
_OBJECTS = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"


@cache
def _schema() -> tuple[str, dict[tuple[str, str], str]]:
    """The newest revision and its ``(type, name) -> sql``, from a new store made of ``schema.sql``."""
    connection = sqlite3.connect(":memory:")
    try:
        # schema.sql read here, not through .schema: the read path (verify) never loads SQLAlchemy
        connection.executescript(resources.files("dataidx.store").joinpath("schema.sql").read_text())
        (revision,), = connection.execute("SELECT version_num FROM alembic_version")
        return revision, {(kind, name): sql for kind, name, sql in connection.execute(_OBJECTS)}
    finally:
        connection.close()


def expected_objects() -> dict[tuple[str, str], str]:
    """``(type, name) -> sql`` of a new store of the newest revision."""
    return _schema()[1]


def schema_problems(execute: Execute) -> list[str]:
    """What a store file of the newest revision holds besides, or instead of, its schema."""
    expected = expected_objects()
    found = {(kind, name): sql for kind, name, sql in execute(_OBJECTS)}
    problems = [f"{kind} '{name}' is not part of a dataidx store" for kind, name in found
                if (kind, name) not in expected]
    # A view's text is the migrations' own; a table's is not compared, since SQLite rewrites it
    # as migrations alter the table (the columns are what they are, or every read would fail).
    problems += [f"view '{name}' differs from the schema" for (kind, name), sql in found.items()
                 if kind == "view" and (kind, name) in expected and sql != expected[(kind, name)]]
    problems += [f"{kind} '{name}' is missing" for kind, name in expected if (kind, name) not in found]
    return problems


def disarm(execute: Execute, store: object) -> None:
    """Before a write to ``store``: drop every trigger (none belongs to a store), and refuse a
    store of the newest revision whose views are not the schema's."""
    for (name,) in execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        execute(f'DROP TRIGGER "{name.replace(chr(34), chr(34) * 2)}"')
        logger.warning("%s: dropped trigger %r before writing: no dataidx store has triggers", store, name)
    revision, expected = _schema()
    if [version for (version,) in execute("SELECT version_num FROM alembic_version")] != [revision]:
        return  # an older store's views are its revision's; migrate rewrites them
    changed = [name for kind, name, sql in execute(_OBJECTS)
               if kind == "view" and ("view", name) in expected and sql != expected[("view", name)]]
    if changed:
        raise StoreError(f"{store}: view {', '.join(repr(n) for n in changed)} differs from dataidx's schema: the "
                         "store was altered; rebuild it")

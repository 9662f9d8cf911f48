"""The objects a store file may hold: its revision's tables, indexes and views, and no triggers.

A store is a file anyone can edit. A trigger added to it fires inside dataidx's own writes (one
on ``mixture_positions`` can make ``mix`` store one sample 37 times while it prints the counts it
meant), and a view put in place of a table or view of ours changes what every command reads, or
never finishes. No dataidx schema has a trigger, so writes drop any they find; a store of the
newest revision whose schema objects are replaced, altered or missing is refused on every open
and write; ``verify`` also names the objects of other names (a user's own index or view).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
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


Objects = Mapping[tuple[str, str], str | None]


def compared(found: Objects, expected: Objects) -> tuple[list[str], list[str]]:
    """What a store holds in place of the ``expected`` ``(type, name) -> sql`` (another type under
    one of their names, a view of other text, nothing), and its objects of other names. A text
    of None is not compared (PostgreSQL keeps a view's text as it reads it back, not as written)."""
    kinds = {name: kind for kind, name in expected}
    replaced, others = [], []
    for (kind, name), sql in found.items():
        if (kind, name) in expected:
            # A view's text is the migrations' own; a table's is not compared, since SQLite
            # rewrites it as migrations alter the table (its columns are what reads find, or fail).
            if kind == "view" and None not in (sql, expected[(kind, name)]) and sql != expected[(kind, name)]:
                replaced.append(f"view '{name}' differs from the schema")
        elif name in kinds and kind != "trigger":  # a trigger never changes a read; writes drop it
            replaced.append(f"{kind} '{name}' in place of the {kinds[name]}")
        else:
            others.append(f"{kind} '{name}' is not part of a dataidx store")
    named = {name for kind, name in found if kind != "trigger"}
    replaced += [f"{kind} '{name}' is missing" for kind, name in expected if name not in named]
    return replaced, others


def _file_objects(execute: Execute) -> tuple[list[str], list[str]]:
    return compared({(kind, name): sql for kind, name, sql in execute(_OBJECTS)}, expected_objects())


def schema_problems(execute: Execute) -> list[str]:
    """What a store file of the newest revision holds besides, or instead of, its schema."""
    replaced, others = _file_objects(execute)
    return others + replaced


def replaced_objects(execute: Execute) -> list[str]:
    """The schema's tables, views and indexes that a store file of the newest revision holds
    replaced (a view of a table's name), altered or not at all: what its reads would then answer
    wrong, or never finish (a recursive view), so every open refuses them. Reads one row per
    object, a fraction of a millisecond. Objects of other names are left alone (a user's own
    index or view; triggers are dropped by writes)."""
    return _file_objects(execute)[0]


def refusal(store: object, problems: list[str]) -> StoreError:
    """The one line for a store whose schema objects are not the schema's (at most three named)."""
    shown = "; ".join(problems[:3]) + (f" and {len(problems) - 3} more" if len(problems) > 3 else "")
    return StoreError(f"{store}: {shown}: the store was altered; rebuild it")


def disarm(execute: Execute, store: object) -> None:
    """Before a write to ``store``: drop every trigger (none belongs to a store), and refuse a
    store of the newest revision whose schema objects are replaced, altered or missing."""
    for (name,) in execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        execute(f'DROP TRIGGER "{name.replace(chr(34), chr(34) * 2)}"')
        logger.warning("%s: dropped trigger %r before writing: no dataidx store has triggers", store, name)
    revision, _ = _schema()
    if [version for (version,) in execute("SELECT version_num FROM alembic_version")] != [revision]:
        return  # an older store's objects are its revision's; migrate rewrites them
    if problems := replaced_objects(execute):
        raise refusal(store, problems)

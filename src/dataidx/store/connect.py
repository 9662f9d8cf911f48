"""Opening a store to read it: the one place a read picks its backend, and the checks every
open makes (the store exists, is a dataidx store, and is of the schema revision this code reads).

A store is a SQLite file whose schema Alembic created, or the same tables in a PostgreSQL
schema. Either way the caller gets a :class:`~dataidx.store.dialect.ReadConnection`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import NotFoundError, StoreError
from .dialect import ReadConnection
from .location import PostgresStore, store_location
from .postgres.read import open_postgres
from .sqlite.read import open_file

#: Alembic revision of the newest schema this code reads and writes.
SCHEMA_REVISION = "0010"
#: Every revision a store may carry, oldest first; older ones are upgraded by `dataidx migrate`.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010")


def connect_readonly(store: str | os.PathLike[str] | PostgresStore) -> ReadConnection:
    """A read-only connection to a current store (a file or a PostgreSQL URL); raises
    StoreError naming the problem.

    Example::

        connection = connect_readonly("demo.db")
        connection.execute("SELECT count(*) FROM entries").fetchone()
    """
    connection, revision = open_any_revision(store)
    if revision != SCHEMA_REVISION:
        connection.close()
        if revision in REVISIONS:
            raise StoreError(
                f"{store}: store schema revision {revision!r} is older than {SCHEMA_REVISION!r}; "
                f"upgrade it with: dataidx migrate {store}"
            )
        raise StoreError(
            f"{store}: store schema revision {revision!r} is unknown to this dataidx (newest {SCHEMA_REVISION!r}); "
            "it was made by a newer dataidx: upgrade dataidx"
        )
    return connection


def store_revision(store: str | os.PathLike[str] | PostgresStore) -> str | None:
    """The schema revision recorded in a store, whichever it is."""
    connection, revision = open_any_revision(store)
    connection.close()
    return revision


def open_any_revision(store: str | os.PathLike[str] | PostgresStore) -> tuple[ReadConnection, str | None]:
    """A read connection to a store of any schema revision, and that revision (for checks that
    must read old stores too: what a rebuild would delete, which revision to migrate from)."""
    location = store_location(store)
    if isinstance(location, PostgresStore):
        return open_postgres(location)
    return open_file(Path(location))


def not_found(connection: ReadConnection, table: str, kind: str, name: str, store: str | os.PathLike[str],
              hint: str = "") -> NotFoundError:
    """The error for a missing mixture, spec or plan, listing the names the store does have."""
    names = [row[0] for row in connection.execute(f"SELECT name FROM {table} ORDER BY id")]
    return missing(kind, name, store, names, hint)


def missing(kind: str, name: str, store: str | os.PathLike[str], names: list[str], hint: str = "") -> NotFoundError:
    """``store: no render spec 'x' (specs: a, b)``: one wording for every missing name."""
    listed = ", ".join(names) or f"none{hint}"
    return NotFoundError(f"{store}: no {kind} '{name}' ({kind.split()[-1]}s: {listed})")

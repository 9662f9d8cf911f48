"""Open and check stores without SQLAlchemy: what every read path starts with.

A store is a SQLite file whose schema Alembic created (or the same tables in a PostgreSQL
schema, see :mod:`dataidx.postgres`). Opening a file never imports Alembic or SQLAlchemy
(together a third of a second); it reads ``alembic_version`` and compares it with
:data:`SCHEMA_REVISION`, so ``dataidx info`` and a DataLoader worker start fast.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Union

from .errors import StoreError
from .locations import is_url, store_location

if TYPE_CHECKING:
    from .postgres import PostgresReadConnection

#: What :func:`connect_readonly` gives: sqlite3's connection, or one with its ``execute`` on PostgreSQL.
ReadConnection = Union[sqlite3.Connection, "PostgresReadConnection"]

#: Alembic revision of the newest schema this code reads and writes.
SCHEMA_REVISION = "0005"
#: Every revision a store may carry, oldest first; older ones are upgraded by `dataidx migrate`.
REVISIONS = ("0001", "0002", "0003", "0004", "0005")
SQLITE_HEADER = b"SQLite format 3\x00"


def check_store_file(path: Path) -> None:
    if not path.exists():
        raise StoreError(f"{path}: store not found")
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store: {exc.strerror or exc}") from None
    if header != SQLITE_HEADER:
        raise StoreError(f"{path}: not a dataidx store (not a SQLite file)")


def connect_readonly(path: str | os.PathLike[str]) -> ReadConnection:
    """A read-only DBAPI connection to a current store (a file or a PostgreSQL URL); raises
    StoreError naming the problem."""
    connection, revision = _open(path)
    if revision != SCHEMA_REVISION:
        connection.close()
        if revision in REVISIONS:
            raise StoreError(
                f"{path}: store schema revision {revision!r} is older than {SCHEMA_REVISION!r}; "
                f"upgrade it with: dataidx migrate {path}"
            )
        raise StoreError(
            f"{path}: store schema revision {revision!r} is unknown to this dataidx (newest {SCHEMA_REVISION!r}); "
            "it was made by a newer dataidx: upgrade dataidx"
        )
    return connection


def store_revision(path: str | os.PathLike[str]) -> str | None:
    """The schema revision recorded in a store file, whichever it is."""
    connection, revision = _open(path)
    connection.close()
    return revision


def on_postgres(connection: ReadConnection) -> bool:
    """Whether a read connection is to a store in PostgreSQL (checked without importing psycopg)."""
    return getattr(connection, "dialect", None) == "postgresql"


def read_stamp(connection: ReadConnection) -> int:
    """The store's identity, new with every write: readers check it when they reconnect."""
    if on_postgres(connection):
        from .postgres import read_stamp as read_postgres_stamp

        return read_postgres_stamp(connection)
    return connection.execute("PRAGMA user_version").fetchone()[0]


def _open(store: str | os.PathLike[str]) -> tuple[ReadConnection, str | None]:
    if is_url(store):
        location = store_location(store)
        if not isinstance(location, Path):
            from .postgres import connect_readonly as connect_postgres

            return connect_postgres(location)
        store = location
    path = Path(store)
    check_store_file(path)
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        connection.close()
        if "no such table" in str(exc):
            raise StoreError(f"{path}: not a dataidx store (no schema version)") from None
        raise StoreError(f"{path}: cannot read store: {exc}") from None
    return connection, (row[0] if row else None)


def not_found(connection: ReadConnection, table: str, kind: str, name: str, path: str, hint: str = "") -> StoreError:
    """The error for a missing mixture, spec or plan, listing the names the store does have."""
    names = [row[0] for row in connection.execute(f"SELECT name FROM {table} ORDER BY id")]
    listed = ", ".join(names) or f"none{hint}"
    return StoreError(f"{path}: no {kind} '{name}' ({kind.split()[-1]}s: {listed})")

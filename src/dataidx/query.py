"""Read-only SQL over a store: one SELECT, refused if it would write, attach or change settings.

A file is opened read-only, ``query_only`` is set, and an authorizer allows nothing but reads,
so ``dataidx query`` can never modify a store, whatever the SQL says. On PostgreSQL the
statement runs alone in a read-only transaction (see :func:`dataidx.postgres.run_query`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from .errors import DataidxError, ReadOnlyError
from .locations import PostgresStore, is_url, store_location
from .storefile import connect_readonly

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def _authorize(action: int, *_args: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def run_query(
    path: str | os.PathLike[str], sql: str, parameters: dict[str, Any] | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one read-only statement against the store at ``path``.

    Example::

        columns, rows = run_query("demo.db", "SELECT dataset, count(*) FROM entries GROUP BY dataset")
    """
    location = store_location(path) if is_url(path) else None
    if isinstance(location, PostgresStore):
        from .postgres import run_query as run_postgres_query

        connect_readonly(path).close()  # the store's own errors first: missing, other revision
        return run_postgres_query(location, sql, parameters)
    connection = connect_readonly(path)
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_authorize)
        try:
            cursor = connection.execute(sql, parameters or {})
            rows = cursor.fetchall()
        except sqlite3.ProgrammingError as exc:
            raise DataidxError(f"query refused: {exc}") from None
        except sqlite3.DatabaseError as exc:
            if "not authorized" in str(exc) or "readonly" in str(exc) or "read-only" in str(exc):
                raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run") from None
            raise DataidxError(f"query failed: {exc}") from None
        columns = [d[0] for d in cursor.description or []]
        return columns, rows
    finally:
        connection.close()

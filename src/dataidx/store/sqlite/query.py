"""``dataidx query`` on a store file: reads only, whatever the SQL says.

The file is opened read-only, ``query_only`` is set, and an authorizer allows nothing but reads,
so no statement can write, attach another database or change a setting.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...errors import ReadOnlyError, UsageError
from .read import FileConnection

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def _authorize(action: int, *_args: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def query_file(connection: FileConnection, sql: str, parameters: dict[str, Any] | None
               ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one read-only statement, on a connection this call locks down."""
    connection.execute("PRAGMA query_only = ON")
    connection.set_authorizer(_authorize)
    try:
        cursor = connection.execute(sql, parameters or {})
        rows = cursor.fetchall()
    except sqlite3.ProgrammingError as exc:
        raise UsageError(f"query refused: {exc}") from None
    except sqlite3.DatabaseError as exc:
        if "not authorized" in str(exc) or "readonly" in str(exc) or "read-only" in str(exc):
            raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run") from None
        raise UsageError(f"query failed: {exc}") from None
    columns = [d[0] for d in cursor.description or []]
    return columns, rows

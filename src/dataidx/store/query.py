"""Read-only SQL over a store, ``dataidx query``: the backend that holds the store runs it.

Neither backend lets a statement change the store: a file is locked down by sqlite3's
authorizer (:mod:`.sqlite.query`), PostgreSQL runs it in a read-only transaction that is rolled
back (:mod:`.postgres.query`).
"""

from __future__ import annotations

import os
from typing import Any

from .connect import connect_readonly
from .location import PostgresStore, store_location
from .postgres.query import query_postgres
from .sqlite.query import query_file


def run_query(
    store: str | os.PathLike[str], sql: str, parameters: dict[str, Any] | None = None, *,
    timeout: float | None = None, limit: int | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one read-only statement against ``store``: with ``limit``, at
    most ``limit + 1`` rows (so a caller can tell there were more); with ``timeout``, stopped
    with a UsageError after that many seconds. Ctrl-C stops it on both backends.

    Example::

        columns, rows = run_query("demo.db", "SELECT dataset, count(*) FROM entries GROUP BY dataset")
    """
    connection = connect_readonly(store)  # the store's own errors first: missing, other revision
    location = store_location(store)
    if isinstance(location, PostgresStore):
        connection.close()
        return query_postgres(location, sql, parameters, timeout=timeout, limit=limit)
    try:
        return query_file(connection, sql, parameters, timeout=timeout, limit=limit)
    finally:
        connection.close()

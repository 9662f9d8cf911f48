"""Read-only SQL over a store, ``dataidx query``: the backend of the open store runs it.

Neither backend lets a statement change the store: a file is locked down by sqlite3's
authorizer (:mod:`.sqlite.query`), PostgreSQL runs it in a read-only transaction that is rolled
back (:mod:`.postgres.query`). This is for a user's statements; dataidx's own reads go through
:class:`~dataidx.store.handle.StoreHandle` and its templates.
"""

from __future__ import annotations

from typing import Any

from .connect import reading
from .handle import Store, StoreHandle
from .postgres.query import query_postgres
from .postgres.read import PostgresReadConnection
from .sqlite.query import query_file
from .sqlite.read import FileConnection


def run_query(
    store: Store | StoreHandle, sql: str, parameters: dict[str, Any] | None = None, *,
    timeout: float | None = None, limit: int | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one read-only statement against ``store`` (a location, or an
    open handle): with ``limit``, at most ``limit + 1`` rows (so a caller can tell there were
    more); with ``timeout``, stopped with a UsageError after that many seconds. Ctrl-C stops it
    on both backends.

    Example::

        columns, rows = run_query("demo.db", "SELECT dataset, count(*) FROM entries GROUP BY dataset")
    """
    with reading(store) as handle:  # the store's own errors first: missing, other revision
        connection = handle.connection
        if isinstance(connection, PostgresReadConnection):
            return query_postgres(connection, sql, parameters, timeout=timeout, limit=limit)
        if isinstance(connection, FileConnection):
            return query_file(connection, sql, parameters, timeout=timeout, limit=limit)
        raise TypeError(f"no query for a {type(connection).__name__}")

"""``dataidx query`` on a store file: reads only, whatever the SQL says, at a bounded cost.

The file is opened read-only, ``query_only`` is set, and an authorizer allows nothing but reads
and the functions a read needs, so no statement can write, attach another database, change a
setting or call an extension's function. What a statement may cost (a value's size, a call's
work, an answer's memory) is bounded by :mod:`.bounds`. A progress handler stops a statement at
its time limit or at Ctrl-C: SQLite runs a statement in C, where Python's own signal handling
would wait for it to finish.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import ReadOnlyError, UsageError
from .bounds import STEPS, bounded_cursor
from .sql_functions import refused_function

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}


class _Authorizer:
    """Allows reads and the functions a read needs; remembers the first function it refused."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, first: str | None, second: str | None, *_args: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION:  # the function's name is the second argument
            if not refused_function(action, second):
                return sqlite3.SQLITE_OK
            self.refused = self.refused or second
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


class _Stop:
    """Why a statement should stop now: its deadline passed, or Ctrl-C was pressed."""

    def __init__(self, timeout: float | None) -> None:
        self.deadline = None if not timeout else time.monotonic() + timeout
        self.interrupted = False

    def __call__(self) -> int:
        return int(self.interrupted or (self.deadline is not None and time.monotonic() > self.deadline))


@contextmanager
def _ctrl_c_stops(stop: _Stop) -> Iterator[None]:
    """While the block runs, Ctrl-C asks the statement to stop instead of waiting for it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(*_: Any) -> None:
        stop.interrupted = True

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def query_file(connection: sqlite3.Connection, sql: str, parameters: dict[str, Any] | None, *,
               timeout: float | None = None, limit: int | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one read-only statement, on a connection this call locks down:
    at most ``limit + 1`` rows (so a caller can tell there were more), stopped after ``timeout``
    seconds or at Ctrl-C."""
    connection.execute("PRAGMA query_only = ON")
    authorizer = _Authorizer()
    connection.set_authorizer(authorizer)
    stop = _Stop(timeout)
    cursor = bounded_cursor(connection)
    connection.set_progress_handler(cursor.bounds.progress(stop), STEPS)
    try:
        with _ctrl_c_stops(stop), cursor.bounds.applied(stop):
            cursor.execute(sql, parameters or {})
            rows = cursor.fetchall() if limit is None else cursor.fetchmany(limit + 1)
    except sqlite3.ProgrammingError as exc:
        raise UsageError(f"query refused: {exc}") from None
    except sqlite3.DatabaseError as exc:
        if stop.interrupted:
            raise KeyboardInterrupt from None
        if stop.deadline is not None and "interrupted" in str(exc):
            raise UsageError(f"query stopped after {timeout:g} s (--timeout; 0 for none)") from None
        if authorizer.refused:
            raise ReadOnlyError(f"query refused: function {authorizer.refused}() is not one a read needs") from None
        if cursor.bounds.refused:
            raise UsageError(f"query refused: {cursor.bounds.refused}") from None
        if "not authorized" in str(exc) or "readonly" in str(exc) or "read-only" in str(exc):
            raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run") from None
        raise UsageError(f"query failed: {exc}") from None
    finally:
        connection.set_progress_handler(None, 0)
        connection.set_authorizer(None)  # the connection may be a handle's that reads on
    columns = [d[0] for d in cursor.description or []]
    return columns, rows

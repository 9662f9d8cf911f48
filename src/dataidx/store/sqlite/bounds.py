"""What one statement a user sends may cost in time and memory (``dataidx query``, ``dataidx serve``).

SQLite looks at the clock and at Ctrl-C only between loop iterations, and runs a function call as
one step: ``instr(hex(zeroblob(4000000)), hex(zeroblob(40000))||'1')`` is one step of 6-20 s that
no time limit stops, and a value may be a gigabyte. So a user's statement runs under these bounds:

- every value it reads or makes is at most :data:`VALUE_BYTES` (SQLite's ``SQLITE_LIMIT_LENGTH``),
  which also bounds a call of a function whose cost grows with its arguments (tens of ms);
- the functions whose one call costs the product of two arguments' sizes (:data:`PAIRWISE`:
  ``instr``, ``replace``, ``LIKE``, ``GLOB``, ``trim`` with a set, ``json_patch``...) are
  wrapped: a call whose product passes its budget (about a tenth of a second) is refused, and
  each call looks at the statement's deadline and Ctrl-C first; within the budget SQLite's own
  function answers, on a private connection, so results are SQLite's exactly;
- the rows an answer holds are counted as they are fetched, and it stops past :data:`ANSWER_BYTES`.

Each refusal is recorded so the caller can say it in one line.
"""

from __future__ import annotations

import sqlite3
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from .read import stopped_read
from .sql_functions import refused_function

#: The most bytes one value may hold: well above any a store holds (a length chunk is 4 MiB).
VALUE_BYTES = 16 << 20
#: The most memory an answer's rows may hold in Python.
ANSWER_BYTES = 256 << 20
#: SQLite virtual machine steps between two looks at the clock and at Ctrl-C (about 10% slower
#: than 10,000 on a tight scan; a step may take tens of ms, so fewer steps bound the overrun).
STEPS = 100

#: (function, arguments) whose one call costs about the product of its first two arguments'
#: sizes, and the largest product one call may take: about 0.1 s each, measured on SQLite 3.40
#: (memcmp-based search ~2e10 character pairs a second; pattern and set matching ~5e8).
PAIRWISE = {("instr", 2): 2e9, ("replace", 3): 2e9, ("json_patch", 2): 2e9,
            ("like", 2): 5e7, ("like", 3): 5e7, ("glob", 2): 5e7,
            ("trim", 2): 5e7, ("ltrim", 2): 5e7, ("rtrim", 2): 5e7, ("unhex", 2): 5e7}


def _set_length(connection: sqlite3.Connection, limit: int) -> int:
    """Set ``SQLITE_LIMIT_LENGTH`` (0 in SQLite's C API) and return the one it replaces. Python
    3.10's sqlite3 cannot (``setlimit`` came in 3.11): there an answer's values are bounded only
    as its rows are counted."""
    setlimit = getattr(connection, "setlimit", None)
    return -1 if setlimit is None else setlimit(0, limit)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 24


@cache
def _has(name: str, arity: int) -> bool:
    """Whether this SQLite has the function (``unhex`` came in 3.41): only those are wrapped."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute(f"SELECT {name}({', '.join(['NULL'] * arity)})")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


class StatementBounds:
    """The bounds of one connection's user statements (see the module docstring). Active inside
    :meth:`applied` (``dataidx query``, on a store handle's connection, which reads on after) or
    from :meth:`activate` on (a connection of ``dataidx serve``)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        #: SQLite's own functions, for the wrapped calls within their budget
        self.own = sqlite3.connect(":memory:", check_same_thread=False)
        _set_length(self.own, VALUE_BYTES)
        #: why the last statement was refused (a wrapped call past its budget, an answer too large)
        self.refused: str | None = None
        #: whether a wrapped call found the statement's deadline passed or Ctrl-C pressed
        self.stopped = False
        self.stop: Callable[[], Any] | None = None
        self.active = False
        for (name, arity), budget in PAIRWISE.items():
            if _has(name, arity):
                connection.create_function(name, arity, self._wrapped(name, arity, budget), deterministic=True)

    def _wrapped(self, name: str, arity: int, budget: float) -> Callable[..., Any]:
        sql = f"SELECT {name}({', '.join(['?'] * arity)})"

        # A call that stops its statement answers NULL: the statement stops at its next look at
        # progress() and a cursor says why (raise_stopped). Not by raising, which a process that
        # shows callback tracebacks (Datasette) prints, nor by interrupt(), which would also stop
        # the connection's next statement while this one's cursor is open.
        def call(*arguments: Any) -> Any:
            if self.active:
                if self.refused is not None or self.stopped:
                    return None
                if self.stop is not None and self.stop():
                    self.stopped = True
                    return None
                sizes = _size(arguments[0]), _size(arguments[1])
                if sizes[0] * sizes[1] > budget:
                    self.refused = (f"{name}() of {sizes[0]:,} and {sizes[1]:,} characters compares more pairs "
                                    f"than one call may ({budget:,.0f}): make them shorter (substr)")
                    return None
            return self.own.execute(sql, arguments).fetchone()[0]

        return call

    def progress(self, handler: Callable[[], Any] | None) -> Callable[[], Any]:
        """The progress handler to install: ``handler`` (the statement's deadline and Ctrl-C),
        which also stops a statement a wrapped call refused."""
        return lambda: self.refused is not None or self.stopped or (handler is not None and handler())

    def raise_stopped(self, error: sqlite3.DatabaseError | None = None) -> None:
        """Raise what a statement these bounds stopped says: ``interrupted`` (as SQLite says it)
        for a deadline or Ctrl-C a wrapped call found, the reason for a refusal; else ``error``."""
        if self.stopped:
            raise sqlite3.OperationalError("interrupted")
        if error is not None and self.refused is None:
            self.refused = self.reason(error)
        if self.refused is not None:
            raise sqlite3.OperationalError(self.refused)
        if error is not None:
            raise error

    def activate(self, stop: Callable[[], Any] | None = None) -> None:
        """Bound every later statement; ``stop()`` is the statement's own deadline and Ctrl-C."""
        _set_length(self.connection, VALUE_BYTES)
        self.refused, self.stopped, self.stop, self.active = None, False, stop, True

    @contextmanager
    def applied(self, stop: Callable[[], Any] | None = None) -> Iterator[StatementBounds]:
        """Bound the statements of the block, and give the connection back as it was."""
        length = _set_length(self.connection, VALUE_BYTES)
        self.activate(stop)
        try:
            yield self
        finally:
            self.active, self.stop = False, None
            _set_length(self.connection, length)

    def reason(self, error: BaseException) -> str | None:
        """Why a statement that raised ``error`` was stopped by these bounds, in words; None if not."""
        if self.refused is not None:
            return self.refused
        if isinstance(error, sqlite3.DataError) and "too big" in str(error):
            return f"a value passed {VALUE_BYTES >> 20} MiB, the most one value may hold here"
        return None


def bounds_of(connection: sqlite3.Connection) -> StatementBounds:
    """The connection's bounds, made on first use and kept with it (its functions stay wrapped)."""
    found = getattr(connection, "_dataidx_bounds", None)
    if found is None:
        found = StatementBounds(connection)
        connection._dataidx_bounds = found  # type: ignore[attr-defined]
    return found


def row_bytes(row: tuple[Any, ...]) -> int:
    """The memory one row of an answer holds in Python: what :data:`ANSWER_BYTES` counts."""
    return sys.getsizeof(row) + sum(map(sys.getsizeof, row))


def past_answer(held: int, rows: int) -> str | None:
    """Why an answer holding ``held`` bytes in ``rows`` rows stops, or None while it may go on
    (the same words on both backends)."""
    if held <= ANSWER_BYTES:
        return None
    return (f"its answer passed {ANSWER_BYTES >> 20} MiB after {rows:,} rows: narrow it (WHERE, LIMIT) or write the "
            "data with dataidx export")


class BoundedCursor(sqlite3.Cursor):
    """A cursor of a bounded connection: its fetches count the memory the answer's rows hold and
    stop past :data:`ANSWER_BYTES`, and a statement its bounds stopped raises an error that says
    why (``interrupted`` for a deadline or Ctrl-C, as SQLite says it)."""

    bounds: StatementBounds
    held = 0

    def execute(self, sql: str, parameters: Any = (), /) -> BoundedCursor:  # type: ignore[override]
        self.bounds.refused, self.bounds.stopped, self.held = None, False, 0
        try:
            super().execute(sql, parameters)
        except sqlite3.DatabaseError as error:
            self.bounds.raise_stopped(error)
        self.bounds.raise_stopped()  # a call refused in the first row, which SQLite may still answer
        return self

    def _counted(self, size: int | None) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        while size is None or len(rows) < size:
            try:
                row = super().fetchone()
            except sqlite3.DatabaseError as error:
                self.bounds.raise_stopped(error)
                raise
            self.bounds.raise_stopped()
            if row is None:
                break
            self.held += row_bytes(row)
            self.bounds.refused = past_answer(self.held, len(rows))
            self.bounds.raise_stopped()
            rows.append(row)
        return rows

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:  # type: ignore[override]
        return self._counted(self.arraysize if size is None else size)

    def fetchall(self) -> list[tuple[Any, ...]]:  # type: ignore[override]
        return self._counted(None)


def bounded_cursor(connection: sqlite3.Connection) -> BoundedCursor:
    """A :class:`BoundedCursor` on ``connection``, under its bounds."""
    cursor = sqlite3.Connection.cursor(connection, BoundedCursor)
    cursor.bounds = bounds_of(connection)
    return cursor


class BoundedConnection(sqlite3.Connection):
    """A connection every statement of which runs bounded, whoever runs it: what ``dataidx
    serve`` gives Datasette. Its cursors are :class:`BoundedCursor`; the time limit Datasette
    sets as a progress handler is looked at every :data:`STEPS` steps (Datasette's 1,000 steps
    of tens of ms each overran its 5 s) and by every wrapped call."""

    def cursor(self, factory: Any = None) -> Any:
        return bounded_cursor(self) if factory is None else super().cursor(factory)

    def set_progress_handler(self, progress_handler: Callable[[], Any] | None, n: int) -> None:
        # Datasette sets its handler before each statement and clears it after: a new statement
        # (its own, through conn.execute, included) starts with nothing refused.
        bounds = bounds_of(self)
        bounds.stop, bounds.refused, bounds.stopped = progress_handler, None, False
        super().set_progress_handler(bounds.progress(progress_handler), min(n, STEPS))


#: The bounded connections open in this process, which :func:`interrupt_statements` stops.
_OPEN: weakref.WeakSet[BoundedConnection] = weakref.WeakSet()


def open_bounded(uri: str) -> BoundedConnection:
    """A connection to the SQLite URI ``uri`` whose every statement is bounded."""
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=BoundedConnection)
    bounds_of(connection).activate()
    _OPEN.add(connection)
    return connection


def interrupt_statements() -> None:
    """Stop the statement each bounded connection of this process runs, at its next loop
    (SQLite's ``sqlite3_interrupt``, safe from any thread): what Ctrl-C does to ``dataidx serve``,
    whose statements run in Datasette's threads."""
    for connection in list(_OPEN):
        connection.interrupt()


class Bounds:
    """What bounds a user's SQL (``dataidx query`` and ``dataidx serve``), as one name for the
    stages that run it: a bounded connection, the functions refused past their work, the
    interrupt of every running statement, and the words for a read stopped by its deadline."""

    open = staticmethod(open_bounded)
    interrupt = staticmethod(interrupt_statements)
    refused = staticmethod(refused_function)
    stopped = staticmethod(stopped_read)

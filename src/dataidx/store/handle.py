"""An open store: the one object that owns a read connection, and what reads go through.

Opened by :func:`~dataidx.store.connect.open_store` (which checks the store and picks its
backend), passed to every function that reads through it, and closed by ``close()`` or a
``with`` block, as sqlite-utils' ``Database`` is. So one command, report or reader reads one
version of a store through one connection, and a PostgreSQL connection is given back when its
reader is done rather than when the garbage collector gets to it.

Its reads are templates (see :mod:`.dialect`): ``handle.all("SELECT ... WHERE id = {mark}", 7)``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import NotFoundError, StoreError, hide_passwords
from .dialect import Cursor, Dialect, ReadConnection
from .location import PostgresStore

Store = str | os.PathLike[str] | PostgresStore

_Closable = TypeVar("_Closable", bound="Closable")


class Closable:
    """``with`` for an object that has ``close()``: the end of the block closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closable) -> _Closable:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


#: Handles open in this process: what ``tests/`` checks every test closes.
_OPEN: weakref.WeakSet[StoreHandle] = weakref.WeakSet()
#: Handles the garbage collector closed because nobody else did: their names, newest last.
_UNCLOSED: list[str] = []


class TemplateReads:
    """Rows of a read template, whoever runs it: a reader's :class:`StoreHandle` or a writer's
    working copy (``store.sqlite.working_copy.WorkingCopy``) implement ``execute`` and ``name``,
    and read the rest the same way."""

    name: Any

    def execute(self, template: str, *parameters: Any) -> Cursor:
        raise NotImplementedError

    def one(self, template: str, *parameters: Any) -> tuple[Any, ...] | None:
        """The first row of a read, or None."""
        row = self.execute(template, *parameters).fetchone()
        return None if row is None else tuple(row)

    def value(self, template: str, *parameters: Any) -> Any:
        """The first column of the first row of a read that always has one (``count(*)``, ``max``)."""
        row = self.one(template, *parameters)
        if row is None:
            raise StoreError(f"{self.name}: a read that always answers gave nothing; the store is damaged")
        return row[0]

    def all(self, template: str, *parameters: Any) -> list[tuple[Any, ...]]:
        """Every row of a read, as tuples."""
        return [tuple(row) for row in self.execute(template, *parameters).fetchall()]

    def column(self, template: str, *parameters: Any) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in self.execute(template, *parameters).fetchall()]

    def dicts(self, template: str, *parameters: Any) -> list[dict[str, Any]]:
        """Every row of a read, as dicts keyed by column name."""
        cursor = self.execute(template, *parameters)
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]

    def missing(self, table: str, kind: str, name: str, hint: str = "") -> NotFoundError:
        """The error for a missing mixture, spec or plan, listing the names the store does have."""
        return missing(kind, name, store=self.name, names=self.column(f"SELECT name FROM {table} ORDER BY id"),
                       hint=hint)


class StoreHandle(Closable, TemplateReads):
    """A read-only connection to a current store, with its name for messages.

    Example::

        with open_store("demo.db") as handle:
            handle.all("SELECT name FROM mixtures WHERE entries > {mark}", 0)
    """

    def __init__(self, store: Store, connection: ReadConnection) -> None:
        #: The store as given (a path, or a URL less its password): what messages print.
        self.name = store if isinstance(store, PostgresStore) else hide_passwords(os.fspath(store))
        self.connection = connection
        self.dialect: Dialect = connection.dialect
        self._spelled: dict[str, str] = {}
        self.closed = False
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"<StoreHandle {self.name}{' (closed)' if self.closed else ''}>"

    def sql(self, template: str) -> str:
        """``template`` spelled for this store's backend, once per template."""
        spelled = self._spelled.get(template)
        if spelled is None:
            spelled = self._spelled[template] = self.dialect.sql(template)
        return spelled

    def _connection(self) -> ReadConnection:
        if self.closed:
            raise StoreError(f"{self.name}: read after the store was closed")
        return self.connection

    def execute(self, template: str, *parameters: Any) -> Cursor:
        """A cursor over one read; ``{mark}`` takes the ``parameters`` in order."""
        return self._connection().execute(self.sql(template), parameters)

    def fetch(self, template: str, *parameters: Any) -> list[tuple[Any, ...]]:
        """Rows of a read whose select list starts with ``{stamped}``: a StaleStoreError if the
        store was replaced since it was opened and what its reader reads changed (see
        :attr:`ReadConnection.on_new_stamp`). The hot path of every fetch."""
        return self._connection().fetch(self.sql(template), parameters)

    def stamp(self) -> int:
        """The store's identity, new with every write."""
        return self._connection().stamp()

    def integrity(self) -> list[str]:
        """Damage the backend finds in its own pages; empty when there is none."""
        return self._connection().integrity()

    def on_new_stamp(self, check: Callable[[], None]) -> None:
        """Fetches that find a newer store call ``check`` (it raises if what they read changed)."""
        self._connection().on_new_stamp = check

    def tune_for_fetches(self) -> None:
        """Settings for a handle that serves a training run's random reads."""
        self._connection().tune_for_fetches()

    def close(self) -> None:
        """Give the connection back; later reads are refused. Closing twice is harmless."""
        if not self.closed:
            self.closed = True
            _OPEN.discard(self)
            self.connection.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):  # never opened, or closed
            _UNCLOSED[:] = [*_UNCLOSED[-99:], str(self.name)]
            self.close()


def missing(kind: str, name: str, *, store: object, names: list[str], hint: str = "") -> NotFoundError:
    """``store: no render spec 'x' (specs: a, b)``: one wording for every missing name."""
    listed = ", ".join(names) or f"none{hint}"
    return NotFoundError(f"{store}: no {kind} '{name}' ({kind.split()[-1]}s: {listed})")


def open_handles() -> tuple[list[StoreHandle], list[str]]:
    """The handles open in this process, and the names of those the garbage collector had to
    close since the last call (nobody closed them): what a test suite checks stays empty."""
    collected = _UNCLOSED[:]
    _UNCLOSED.clear()
    return list(_OPEN), collected

"""A writer's working copy, read and written with the read path's templates.

Every write fills a SQLite file (the store's copy, or a new store); :class:`WorkingCopy` runs
templates (see :mod:`dataidx.store.dialect`) on it, so a noun's reads are the same text whether
a reader's handle or a writer runs them, and its writes are templates too. Nothing here imports
SQLAlchemy: a noun that can write still loads none when it only reads (``dataidx info``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from ...errors import StoreError
from ..handle import StoreHandle, TemplateReads
from .read import SQLITE

if TYPE_CHECKING:
    from sqlalchemy import Connection

#: Where :func:`dataidx.store.write.rewriting` leaves the store's name on its connection
#: (SQLAlchemy's ``Connection.info``), for messages.
STORE_NAME = "dataidx.store"


class WorkingCopy(TemplateReads):
    """Templates run on a writer's connection: the reads of a handle, and writes."""

    #: the spelling its templates take (what a reader's handle names ``dialect``)
    dialect = SQLITE

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        #: the store being written, as messages name it
        self.name = connection.info.get(STORE_NAME, "STORE")

    def execute(self, template: str, *parameters: Any) -> Any:
        """A cursor over one statement; ``{mark}`` takes the ``parameters`` in order."""
        return self.connection.exec_driver_sql(SQLITE.sql(template), parameters)

    def dicts(self, template: str, *parameters: Any) -> list[dict[str, Any]]:
        """Every row of a read, as dicts keyed by column name (SQLAlchemy's result names them)."""
        result = self.execute(template, *parameters)
        return [dict(zip(result.keys(), row)) for row in result.fetchall()]

    def fetch(self, template: str, *parameters: Any) -> list[tuple[Any, ...]]:
        """A reader's fetch, on the copy a writer holds (``{stamped}`` is nothing on a file)."""
        return self.all(template, *parameters)

    def insert(self, template: str, *parameters: Any) -> int:
        """Run one ``INSERT`` and return the new row's id."""
        return self.execute(template, *parameters).lastrowid

    def insert_row(self, table: str, values: dict[str, Any]) -> int:
        """Insert one row of ``table`` from its columns by name (as sqlite-utils' ``Table.insert``); its id."""
        columns = ", ".join(values)
        marks = ", ".join(["{mark}"] * len(values))
        return self.insert(f"INSERT INTO {table} ({columns}) VALUES ({marks})", *values.values())

    def insert_many(self, template: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one ``INSERT`` per row of ``rows`` (``executemany``: one statement, prepared once)."""
        rows = list(rows)
        if rows:
            self.connection.exec_driver_sql(SQLITE.sql(template), rows)


#: What a noun reads (and, a working copy, writes) through: a reader's handle, a writer's working
#: copy, or the SQLAlchemy connection of a write (``rewriting``), which it wraps.
Access: TypeAlias = "StoreHandle | WorkingCopy | Connection"


def access(store: StoreHandle | WorkingCopy | Connection) -> StoreHandle | WorkingCopy:
    """``store`` as a noun reads through it: a write's connection becomes its working copy."""
    if isinstance(store, (StoreHandle, WorkingCopy)):
        return store
    return WorkingCopy(store)


def writable(store: StoreHandle | WorkingCopy) -> WorkingCopy:
    """``store`` if a write can go through it; a store opened to read is refused."""
    if not isinstance(store, WorkingCopy):
        raise StoreError(f"{store.name}: opened to read; write inside dataidx.store.rewriting(store)")
    return store

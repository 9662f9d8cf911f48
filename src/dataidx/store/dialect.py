"""What the read path reads through: one connection protocol, and the SQL fragments that each
backend spells its own way.

Reads are written once, as SQL templates with ``{mark}`` for a parameter and ``{ids}`` for a
list of ids sent as one JSON text; ``connection.dialect.sql(template)`` fills them in for the
backend at hand, so no statement is ever rewritten after it was written. A fetch also carries
``{stamped}`` at the head of its select list: nothing on a file (a file a process opened stays
readable after it is replaced), the store's stamp on PostgreSQL (a schema is swapped in place),
so every fetch knows which store answered it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Dialect:
    """The spellings of one backend (see the module docstring)."""

    mark: str
    ids: str
    stamped: str
    #: ``json_array.format(expression)``: one JSON text of the expression over all rows
    json_array: str

    def sql(self, template: str, **fragments: str) -> str:
        """``template`` in this dialect, with any further ``fragments`` filled in too (hot paths keep
        the result rather than call this per read)."""
        return template.format(mark=self.mark, ids=self.ids, stamped=self.stamped, **fragments)


class Cursor(Protocol):
    description: Any

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class ReadConnection(Protocol):
    """A read-only connection to a current store, a file's or a PostgreSQL schema's."""

    dialect: Dialect
    #: Called when a fetch finds the store written since this connection opened it: returns if
    #: what the caller reads is unchanged, raises StaleStoreError if not (None: always raise).
    on_new_stamp: Callable[[], None] | None

    def execute(self, sql: str, parameters: Sequence[Any] = ...) -> Cursor:
        """Run SQL in this connection's dialect."""

    def fetch(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """All rows of a read whose select list starts with ``{stamped}``, that fragment left
        out; raises StaleStoreError if the store was replaced since this connection opened."""

    def stamp(self) -> int:
        """The store's identity, new with every write."""

    def integrity(self) -> list[str]:
        """Damage the backend finds in its own pages; empty when there is none."""

    def tune_for_fetches(self) -> None:
        """Settings for a connection that serves a training run's random reads."""

    def close(self) -> None: ...

"""The one way the read path writes SQL: templates whose fragments each backend spells.

A read is written once, as a template: ``{mark}`` for each parameter (passed positionally),
``{ids}`` for a list of ids sent as one JSON text, ``{trains}`` for the statuses of entries that
train, and ``{stamped}`` at the head of a fetch's select list: nothing on a file (a file a
process opened stays readable after it is replaced), the store's stamp on PostgreSQL (a schema
is swapped in place), so every fetch knows which store answered it. :meth:`Dialect.sql` fills
in those names and no others, so a literal brace in SQL text stays as written, and no statement
is rewritten after it was spelled. :class:`~dataidx.store.handle.StoreHandle` spells and runs
them; writers on SQLite spell theirs with the SQLite dialect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#: What an entry can come to under a render spec, worst last; the first two train, the others
#: say why an entry does not. Stored in ``entry_renders.status``.
STATUSES = ("ok", "truncated", "too_long", "no_supervision", "render_error")
TRAINING_STATUSES = ("ok", "truncated")
#: :data:`TRAINING_STATUSES` as a SQL list, what ``{trains}`` spells: ``status IN ({trains})``.
TRAINING_STATUSES_SQL = ", ".join(f"'{status}'" for status in TRAINING_STATUSES)

#: The schema revisions a store records, read the same on both backends when it is opened:
#: Alembic keeps one row, and two are enough to say the store was altered.
REVISIONS_READ = "SELECT version_num FROM alembic_version LIMIT 2"

_FRAGMENT = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """The spellings of one backend (see the module docstring)."""

    mark: str
    ids: str
    stamped: str
    #: ``int_list.format(expression)``: an integer expression over all rows as one text, the
    #: values separated by commas (one text to parse, not a row or a Python int per value)
    int_list: str
    fragments: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fragments", {"mark": self.mark, "ids": self.ids, "stamped": self.stamped,
                                               "trains": TRAINING_STATUSES_SQL})

    def sql(self, template: str, **fragments: str) -> str:
        """``template`` in this dialect, with any further ``fragments`` filled in too; a brace
        around any other name is left as written (hot paths keep the result rather than call
        this per read)."""
        known = {**self.fragments, **fragments}
        return _FRAGMENT.sub(lambda found: known.get(found[1], found[0]), template)


class Reads(Protocol):
    """Whatever runs a read template and returns its rows: a store handle, or a writer's
    working copy (``store.sqlite.working_copy.WorkingCopy``), so a check reads the same in both."""

    def all(self, template: str, *parameters: Any) -> list[tuple[Any, ...]]: ...


class Cursor(Protocol):
    """What a read returns, on either backend (a DBAPI cursor)."""

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchmany(self, size: int = ..., /) -> list[Any]: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class ReadConnection(Protocol):
    """A read-only connection to a current store, a file's or a PostgreSQL schema's: what a
    :class:`~dataidx.store.handle.StoreHandle` owns. Its SQL is already spelled."""

    @property
    def dialect(self) -> Dialect: ...

    #: Called when a fetch finds the store written since this connection opened it: returns if
    #: what the caller reads is unchanged, raises StaleStoreError if not (None: always raise).
    on_new_stamp: Callable[[], None] | None

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor:
        """Run SQL in this connection's dialect."""
        ...

    def fetch(self, sql: str, parameters: Sequence[Any], /) -> list[tuple[Any, ...]]:
        """All rows of a read whose select list starts with ``{stamped}``, that fragment left
        out; raises StaleStoreError if the store was replaced since this connection opened."""
        ...

    def stamp(self) -> int:
        """The store's identity, new with every write."""
        ...

    def integrity(self) -> list[str]:
        """Damage the backend finds in its own pages; empty when there is none."""
        ...

    def replaced_objects(self) -> list[str]:
        """The schema's tables and views (and a file's indexes) that this store holds replaced
        by another kind of object, altered or not at all; empty when there are none. Checked on
        every open: dataidx's reads through them would answer wrong, or never finish."""
        ...

    def tune_for_fetches(self) -> None:
        """Settings for a connection that serves a training run's random reads."""
        ...

    def close(self) -> None: ...

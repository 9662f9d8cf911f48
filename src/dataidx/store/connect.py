"""Opening a store to read it: the one place a read picks its backend, and the checks every
open makes (the store exists, is a dataidx store, and is of the schema revision this code reads).

A store is a SQLite file whose schema Alembic created, or the same tables in a PostgreSQL
schema. Either way the caller gets a :class:`~dataidx.store.handle.StoreHandle` to read through
and close.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from .dialect import ReadConnection
from .handle import Store, StoreHandle
from .location import PostgresStore, store_location
from .postgres.read import open_postgres
from .revisions import REVISIONS, SCHEMA_REVISION
from .sqlite.objects import refusal
from .sqlite.read import open_file


def open_store(store: Store) -> StoreHandle:
    """An open, current store (a file or a PostgreSQL URL), to read through and close; raises
    StoreError naming the problem.

    Example::

        with open_store("demo.db") as handle:
            handle.value("SELECT count(*) FROM entries")
    """
    connection, revision = open_any_revision(store)
    if revision != SCHEMA_REVISION:
        connection.close()
        if revision in REVISIONS:
            raise StoreError(
                f"{store}: store schema revision {revision!r} is older than {SCHEMA_REVISION!r}; "
                f"upgrade it with: dataidx migrate {store}"
            )
        raise StoreError(
            f"{store}: store schema revision {revision!r} is unknown to this dataidx (newest {SCHEMA_REVISION!r}); "
            "it was made by a newer dataidx: upgrade dataidx"
        )
    try:
        if problems := connection.replaced_objects():
            raise refusal(store, problems)
    except BaseException:
        connection.close()
        raise
    return StoreHandle(store, connection)


@contextmanager
def reading(store: Store | StoreHandle) -> Iterator[StoreHandle]:
    """A handle for the block: ``store`` itself when it is one (the caller closes it), else the
    store opened for the block and closed after it. What a function that may be handed either
    an open store or a path reads through.

    Example::

        with reading(store) as handle:
            handle.all("SELECT name FROM mixtures")
    """
    if isinstance(store, StoreHandle):
        yield store
        return
    with open_store(store) as handle:
        yield handle


def check_store(store: Store) -> None:
    """The store's own errors (missing, not a store, of another revision), before work on it."""
    open_store(store).close()


def store_revision(store: Store) -> str | None:
    """The schema revision recorded in a store, whichever it is."""
    connection, revision = open_any_revision(store)
    connection.close()
    return revision


def open_any_revision(store: Store) -> tuple[ReadConnection, str | None]:
    """A read connection to a store of any schema revision, and that revision (for checks that
    must read old stores too: what a rebuild would delete, which revision to migrate from)."""
    location = store_location(store)
    connection, revisions = open_postgres(location) if isinstance(location, PostgresStore) \
        else open_file(Path(location))
    if len(revisions) > 1:  # Alembic's upgrade would stop on them with a traceback
        connection.close()
        raise StoreError(f"{store}: alembic_version records more than one schema revision "
                         f"({', '.join(map(repr, revisions))}), where a store records one: it was altered; rebuild it")
    return connection, (revisions[0] if revisions else None)

"""Writing a store, the one place a write picks its backend: new stores, changes, migrations.

Every write fills a SQLite file first. For a store file that is a temporary file beside it,
renamed into place when complete; for a store in PostgreSQL it is a local working copy,
published into the store's schema in one transaction when complete. Either way a failure or a
kill leaves the store as it was, and readers see the old store or the new one, never half.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DatabaseError

from ..errors import StaleStoreError, StoreError
from ..progress import MessageProgress
from .connect import check_store, store_revision
from .holdings import refuse_to_lose
from .identity import ReadIdentity, identity_of
from .location import PostgresStore, store_location, streams_folder
from .postgres.publish import postgres_writer, publish_to_postgres, pull_from_postgres, working_folder
from .postgres.swap import refuse_foreign_schema
from .revisions import REVISIONS, SCHEMA_REVISION
from .specs.token_files import prune_token_files, recorded_token_files
from .sqlite.files import (
    check_writable,
    create_store,
    disk_errors,
    real_path,
    refuse_to_overwrite,
    remove_stale_temporaries,
    remove_temporary,
    renew_stamp,
    replace_file,
    rewritten_copy,
    stamped_transaction,
    temporary_beside,
    writer_lock,
)
from .sqlite.migrations import upgrade
from .sqlite.working_copy import STORE_NAME, WorkingCopy
from .streams import prune_streams, recorded_streams


@dataclass
class NewStore:
    """A store being built: the engine of the SQLite file to fill, where the build materialises
    streaming sources, and (filled in by the build) the materialised files the store reads."""

    location: Path | PostgresStore
    engine: Engine
    streams: Path
    used_streams: set[str] = field(default_factory=set)


@contextmanager
def creating(target: str | os.PathLike[str], progress: MessageProgress | None = None, *, replace: bool = False,
             specs: Collection[str] = ()) -> Iterator[NewStore]:
    """A new, empty store that takes the place of ``target`` only when the block succeeds.

    A store already there is replaced only if it holds nothing but what the block writes again
    (mixture ``default`` and the render ``specs``), or with ``replace``: mixtures, specs and
    plans added to it later are never deleted without a word.

    Example::

        with creating("demo.db") as new, new.engine.begin() as connection:
            ...  # insert datasets, entries, mixtures
    """
    location = store_location(target)
    if isinstance(location, PostgresStore):
        with postgres_writer(location) as server, working_folder() as folder:
            refuse_foreign_schema(server, location)  # before the work, not only when publishing it
            server.commit()
            if not replace:
                refuse_to_lose(location, specs)
            named, streamed = recorded_token_files(location), recorded_streams(location)
            with _filling(folder / "store.db", location) as new:
                yield new
            (progress or (lambda _message: None))(f"publishing into schema '{location.schema}' of {location}")
            publish_to_postgres(folder / "store.db", location, server)
        prune_streams(new.streams, new.used_streams, streamed)
        prune_token_files(location, named)  # the old store's: the new one names none
        return
    location = real_path(location)
    check_writable(location)
    refuse_to_overwrite(location)
    with writer_lock(location):
        if not replace:
            refuse_to_lose(location, specs)
        named, streamed = recorded_token_files(location), recorded_streams(location)
        remove_stale_temporaries(location)
        temporary = temporary_beside(location)
        remove_temporary(temporary)
        try:
            with disk_errors(location), _filling(temporary, location) as new:
                yield new
            with disk_errors(location):
                replace_file(temporary, location)
            prune_streams(new.streams, new.used_streams, streamed)
            prune_token_files(location, named)  # the old store's: the new one names none
        except BaseException:
            remove_temporary(temporary)
            raise


@contextmanager
def _filling(file: Path, location: Path | PostgresStore) -> Iterator[NewStore]:
    engine = create_store(file)
    try:
        yield NewStore(location, engine, streams_folder(location))
        with engine.begin() as connection:
            renew_stamp(connection)
    finally:
        engine.dispose()


@contextmanager
def rewriting(store: str | os.PathLike[str], *, unchanged: ReadIdentity | None = None, task: str = "",
              command: str = "", meanwhile: Callable[[], object] | None = None) -> Iterator[Connection]:
    """A transaction on a copy of a current store, put in its place only if the block succeeds;
    one writer at a time.

    Readers that already have the store open keep reading the old one; new opens see the new
    one; an error or a kill mid-way leaves the store as it was. With ``unchanged`` (what the
    work read, taken before it) the write is refused if another writer changed that meanwhile,
    saying what changed and which ``task`` to do again with which ``command``; writes of other
    mixtures, specs or plans meanwhile are kept. ``meanwhile`` is work done while the copy is
    made (under the writer's lock, before the block), such as planning what the block writes.
    """
    check_store(store)  # the store's own errors first: missing, other revision
    location = store_location(store)
    if isinstance(location, PostgresStore):
        with postgres_writer(location) as server, working_folder() as folder:
            working_copy = folder / "store.db"
            pull_from_postgres(location, server, working_copy)  # row by row in Python: nothing to overlap
            if meanwhile is not None:
                meanwhile()
            with stamped_transaction(working_copy) as connection:
                connection.info[STORE_NAME] = store
                _check_unchanged(connection, store, read=unchanged, task=task, command=command)
                yield connection
            publish_to_postgres(working_copy, location, server)
        return
    with rewritten_copy(location, meanwhile) as connection:
        connection.info[STORE_NAME] = store
        _check_unchanged(connection, store, read=unchanged, task=task, command=command)
        yield connection


def _check_unchanged(connection: Connection, store: str | os.PathLike[str], *, read: ReadIdentity | None, task: str,
                     command: str) -> None:
    """Refuse the write if what the work read changed meanwhile (other writes may have landed)."""
    if read is None:
        return
    changed = read.changed(identity_of(WorkingCopy(connection), **read.names()))
    if changed:
        raise StaleStoreError(f"{store}: {changed} while {task}; run dataidx {command} again")


def migrate_store(store: str | os.PathLike[str]) -> tuple[str | None, str]:
    """Upgrade a store to the newest schema on a copy, then rename it into place.

    Returns the revisions before and after; a store already current is left untouched.
    """
    before = store_revision(store)
    if before == SCHEMA_REVISION:
        return before, before
    location = store_location(store)
    if isinstance(location, PostgresStore):
        raise StoreError(f"{store}: store schema revision {before!r} cannot be upgraded in PostgreSQL by this "
                         f"dataidx (it writes {SCHEMA_REVISION!r}); rebuild the store")
    if before not in REVISIONS:
        raise StoreError(f"{store}: store schema revision {before!r} is unknown to this dataidx; upgrade dataidx")
    with rewritten_copy(location) as connection:
        try:
            upgrade(connection)
        except DatabaseError as exc:  # the tables are not what the recorded revision says
            cause = " ".join(str(exc.orig).split())[:200]
            raise StoreError(f"{store}: cannot upgrade from schema revision {before!r}: its tables are not those of "
                             f"that revision ({cause}); the store is left as it was: rebuild it") from None
    return before, SCHEMA_REVISION

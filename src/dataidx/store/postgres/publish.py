"""Writing a store that lives in PostgreSQL: work on a local SQLite copy, then publish it.

Build, mix, render, pack and the remove commands run exactly as they do on a file (same code,
same checks) against a SQLite working copy; publishing copies the finished copy into a staging
schema and swaps it in for the old one in one transaction. Readers see the old store or the new
one, never half of either, and an error or a kill leaves the old one untouched. One writer at a
time per store: a session advisory lock, which the server drops if the writer dies.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import JSON, Connection, NullPool, create_engine
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.schema import AddConstraint, CreateTable

from ...errors import StoreError
from ..location import PostgresStore
from ..revisions import SCHEMA_REVISION
from ..schema import Base
from ..sqlite.files import create_store, driver_of
from .read import STAMP_TABLE, first_line, require_psycopg
from .swap import quoted, refuse_foreign_schema, replace_schema
from .views import create_views

_BATCH = 50_000


@contextmanager
def postgres_writer(store: PostgresStore) -> Iterator[Connection]:
    """A connection to the store's database that holds the store's writer lock until closed.

    The server's own refusals (no right to create a schema, a full disk) become one StoreError.
    """
    psycopg = require_psycopg(store)
    try:
        engine = create_engine(store.url, poolclass=NullPool)
    except ArgumentError as exc:
        raise StoreError(f"{store}: cannot connect: {exc}") from None
    try:
        try:
            connection = engine.connect()
        except DBAPIError as exc:
            raise StoreError(f"{store}: cannot connect: {first_line(exc.orig or exc)}") from None
        with connection:
            _take_writer_lock(connection, store)
            try:
                yield connection
            except (DBAPIError, psycopg.Error) as exc:  # through SQLAlchemy, or raw (COPY)
                cause = (exc.orig or exc) if isinstance(exc, DBAPIError) else exc
                if not isinstance(cause, psycopg.Error):
                    raise
                raise StoreError(f"{store}: cannot write: {first_line(cause)}") from None
    finally:
        engine.dispose()  # closing the session releases the advisory lock


#: Seconds a writer waits for the writers' lock of a store before it says who holds it and stops.
WRITER_WAIT = 600.0
_HOLDER = """
SELECT a.usename, a.application_name, a.client_addr, a.pid, a.backend_start, a.state
FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid::bigint = ((hashtext(%(key)s)::bigint >> 32) & 4294967295)
  AND l.objid::bigint = (hashtext(%(key)s)::bigint & 4294967295)
"""


def _take_writer_lock(connection: Connection, store: PostgresStore) -> None:
    """Take the store's writers' lock, a session advisory lock. Any role that can connect can
    take one, so a writer waits at most :data:`WRITER_WAIT` seconds, then names who holds it."""
    key = f"dataidx:{store.schema}"
    deadline = time.monotonic() + WRITER_WAIT
    while True:
        taken = connection.exec_driver_sql("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).scalar()
        connection.commit()
        if taken:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(min(1.0, max(0.05, WRITER_WAIT / 20)))
    holder = connection.exec_driver_sql(_HOLDER, {"key": key}).first()
    connection.commit()
    who = "a session that has since ended" if holder is None else (
        f"user '{holder.usename}' (application '{holder.application_name or '-'}', pid {holder.pid}, "
        f"from {holder.client_addr or 'a local socket'}, connected {holder.backend_start:%Y-%m-%d %H:%M:%S}, "
        f"{holder.state})")
    raise StoreError(f"{store}: the writers' lock of schema '{store.schema}' is held by {who}; waited "
                     f"{WRITER_WAIT:g} s. Another write is running, or that session holds it (pg_advisory_lock): "
                     "end it with pg_terminate_backend(pid) if it should not")


@contextmanager
def working_folder() -> Iterator[Path]:
    """A private local folder for the SQLite working copy, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="dataidx-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish_to_postgres(working_copy: Path, store: PostgresStore, connection: Connection) -> None:
    """Copy a finished SQLite store into a new schema that replaces the store's, in one transaction."""
    staging = f"dataidx_staging_{secrets.token_hex(8)}"  # no name a user's schema could have
    source = sqlite3.connect(f"{working_copy.resolve().as_uri()}?mode=ro", uri=True)
    try:
        stamp = source.execute("PRAGMA user_version").fetchone()[0]
        with connection.begin():
            refuse_foreign_schema(connection, store)
            connection.exec_driver_sql(f"CREATE SCHEMA {staging}")
            in_staging = connection.execution_options(schema_translate_map={None: staging})
            for table in Base.metadata.sorted_tables:  # foreign keys after the data: one check each
                in_staging.execute(CreateTable(table, include_foreign_key_constraints=[]))
            connection.exec_driver_sql(f"CREATE TABLE {staging}.alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
            connection.exec_driver_sql(f"CREATE TABLE {staging}.{STAMP_TABLE} (stamp BIGINT NOT NULL)")
            connection.exec_driver_sql(f"INSERT INTO {staging}.alembic_version VALUES (%s)", (SCHEMA_REVISION,))
            connection.exec_driver_sql(f"INSERT INTO {staging}.{STAMP_TABLE} VALUES (%s)", (stamp,))
            raw = driver_of(connection.connection)
            for table in Base.metadata.sorted_tables:
                columns = ", ".join(f'"{column.name}"' for column in table.columns)
                with raw.cursor() as cursor, cursor.copy(f"COPY {staging}.{table.name} ({columns}) FROM STDIN") as copy:
                    for row in source.execute(f"SELECT {columns} FROM {table.name}"):
                        copy.write_row(row)
            for table in Base.metadata.sorted_tables:
                for constraint in table.foreign_key_constraints:
                    in_staging.execute(AddConstraint(constraint))
            create_views(connection, staging)
            replace_schema(connection, staging, store)
            for table in Base.metadata.sorted_tables:
                connection.exec_driver_sql(f"ANALYZE {quoted(store.schema)}.{table.name}")
    finally:
        source.close()


def pull_from_postgres(store: PostgresStore, connection: Connection, working_copy: Path) -> None:
    """Copy the store's tables into a new SQLite file made from ``schema.sql`` (same stamp)."""
    stamp = _current_stamp(connection, store)
    engine = create_store(working_copy)
    target = engine.raw_connection()
    try:
        sqlite = driver_of(target)
        with connection.begin():  # a named cursor streams rows in batches inside a transaction
            for table in Base.metadata.sorted_tables:
                columns = ", ".join(f'"{column.name}"' for column in table.columns)
                selected = ", ".join(f'CAST("{c.name}" AS text)' if isinstance(c.type, JSON) else f'"{c.name}"'
                                     for c in table.columns)
                marks = ", ".join("?" * len(table.columns))
                insert = f"INSERT INTO {table.name} ({columns}) VALUES ({marks})"
                with driver_of(connection.connection).cursor(name="dataidx_pull") as cursor:
                    cursor.execute(f"SELECT {selected} FROM {quoted(store.schema)}.{table.name}")
                    while rows := cursor.fetchmany(_BATCH):
                        sqlite.executemany(insert, rows)
        target.execute(f"PRAGMA user_version = {int(stamp)}")
        target.commit()
    finally:
        target.close()
        engine.dispose()


def _current_stamp(connection: Connection, store: PostgresStore) -> int:
    """The stamp of the store, which must be of the schema revision this dataidx writes."""
    tables = set(connection.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s", (store.schema,)).scalars())
    if not {"alembic_version", STAMP_TABLE} <= tables:
        raise StoreError(f"{store}: no dataidx store in schema '{store.schema}' "
                         "(build one with: dataidx build CONFIG -o URL)")
    revision = connection.exec_driver_sql(f"SELECT version_num FROM {quoted(store.schema)}.alembic_version").scalar()
    stamp = connection.exec_driver_sql(f"SELECT stamp FROM {quoted(store.schema)}.{STAMP_TABLE}").scalar()
    connection.commit()
    if revision != SCHEMA_REVISION:
        raise StoreError(f"{store}: store schema revision {revision!r}, this dataidx reads and writes "
                         f"{SCHEMA_REVISION!r}; use the dataidx that made it, or rebuild the store")
    if stamp is None:
        raise StoreError(f"{store}: the store's {STAMP_TABLE} table is empty: the store is damaged; rebuild it")
    return stamp

"""Replacing a store's schema in PostgreSQL without touching anything dataidx did not make.

A write drops exactly the objects dataidx created in the store's schema, by name and without
CASCADE, then the schema itself (RESTRICT): a table someone added there, or a view in another
schema built on a store table, stops the write with an error instead of being dropped with it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from ...errors import StoreError
from ..location import PostgresStore
from ..schema import Base
from .read import STAMP_TABLE, first_line
from .views import ROUND_SIGNATURE, postgres_views

#: How long one attempt to take the old schema waits for readers' statements, and how often it
#: tries: new reads queue behind a waiting swap, so it waits briefly and lets them through.
LOCK_WAIT = "2s"
SWAP_ATTEMPTS = 150


def quoted(name: str) -> str:
    """A schema name as SQL (names are checked lower-case identifiers; quoting allows keywords)."""
    return f'"{name}"'


def schema_state(connection: Connection, schema: str) -> str:
    """``absent``, ``store`` (it has dataidx's stamp table), ``empty`` or ``other``."""
    oid = connection.exec_driver_sql("SELECT oid FROM pg_namespace WHERE nspname = %s", (schema,)).scalar()
    if oid is None:
        return "absent"
    if connection.exec_driver_sql("SELECT 1 FROM pg_class WHERE relnamespace = %s AND relname = %s AND relkind = 'r'",
                                  (oid, STAMP_TABLE)).scalar():
        return "store"
    holds = connection.exec_driver_sql(
        "SELECT EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = %(o)s) "
        "OR EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = %(o)s) "
        "OR EXISTS (SELECT 1 FROM pg_type WHERE typnamespace = %(o)s) "
        "OR EXISTS (SELECT 1 FROM pg_operator WHERE oprnamespace = %(o)s) "
        "OR EXISTS (SELECT 1 FROM pg_collation WHERE collnamespace = %(o)s)", {"o": oid}).scalar()
    return "other" if holds else "empty"


def refuse_foreign_schema(connection: Connection, store: PostgresStore) -> None:
    """Replace only a dataidx store or an empty schema, never a schema holding anything else."""
    if schema_state(connection, store.schema) == "other":
        raise StoreError(f"{store}: schema '{store.schema}' holds objects and is not a dataidx store; "
                         "refusing to replace it (choose another with ?schema=NAME)")


def replace_schema(connection: Connection, staging: str, store: PostgresStore) -> None:
    """Put ``staging`` in the place of the store's schema, inside the caller's transaction.

    Roles that could use the old schema (PUBLIC included) get USAGE and SELECT on the new one,
    so a read-only role set up once keeps reading after every write.
    """
    import psycopg  # here, not at import: an optional extra

    readers = connection.exec_driver_sql(
        "SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END "
        "FROM pg_namespace AS n, aclexplode(n.nspacl) AS a "
        "WHERE n.nspname = %s AND a.privilege_type = 'USAGE' AND a.grantee <> n.nspowner", (store.schema,),
    ).scalars().all()
    for attempt in range(SWAP_ATTEMPTS):
        try:
            with connection.begin_nested():
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
                _drop_store(connection, store)
                connection.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")
            break
        except DBAPIError as exc:
            cause: Any = exc.orig
            if isinstance(cause, psycopg.errors.LockNotAvailable) and attempt + 1 < SWAP_ATTEMPTS:
                continue
            if isinstance(cause, psycopg.errors.DependentObjectsStillExist):
                detail = (cause.diag.message_detail or "").replace("\n", "; ")
                raise StoreError(f"{store}: schema '{store.schema}' holds objects dataidx did not make, or others "
                                 f"depend on it ({detail}); refusing to replace it") from None
            if isinstance(cause, psycopg.errors.LockNotAvailable):
                raise StoreError(f"{store}: readers kept the store busy for {SWAP_ATTEMPTS} tries of {LOCK_WAIT}; "
                                 f"nothing was changed, try again ({first_line(cause)})") from None
            raise
    connection.exec_driver_sql(f"ALTER SCHEMA {quoted(staging)} RENAME TO {quoted(store.schema)}")
    for role in readers:  # PUBLIC, or a role name as regrole prints it (quoted where needed)
        connection.exec_driver_sql(f"GRANT USAGE ON SCHEMA {quoted(store.schema)} TO {role}")
        connection.exec_driver_sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA {quoted(store.schema)} TO {role}")


def _drop_store(connection: Connection, store: PostgresStore) -> None:
    state = schema_state(connection, store.schema)
    if state == "absent":
        return
    schema = quoted(store.schema)
    if state == "store":
        for view in reversed(list(postgres_views())):
            connection.exec_driver_sql(f"DROP VIEW IF EXISTS {schema}.{view}")
        connection.exec_driver_sql(f"DROP FUNCTION IF EXISTS {schema}.{ROUND_SIGNATURE}")
        for table in reversed(Base.metadata.sorted_tables):
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {schema}.{table.name}")
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {schema}.alembic_version, {schema}.{STAMP_TABLE}")
    connection.exec_driver_sql(f"DROP SCHEMA {schema}")  # RESTRICT: fails if anything else is left

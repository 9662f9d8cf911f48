"""Reading a store that lives in a PostgreSQL schema: connections, revision, stamp, queries.

Every read connection is read-only at the server (``default_transaction_read_only``) and has
the store's schema as its only ``search_path``, so the SQL the SQLite reader runs works here
unchanged but for two spellings (``?`` placeholders, ``json_each`` id lists) translated below.
Writing goes through :mod:`dataidx.pg_publish`.
"""

from __future__ import annotations

import decimal
import re
from typing import Any

from .errors import DataidxError, ReadOnlyError, StoreError
from .locations import PostgresStore

#: Table that marks a schema as a dataidx store and holds its identity (SQLite's user_version).
STAMP_TABLE = "dataidx_store"
_ID_LIST = ("SELECT value FROM json_each(?)", "SELECT CAST(value AS bigint) FROM json_array_elements_text(%s::json)")


def require_psycopg(store: PostgresStore) -> Any:
    """The psycopg module, or a StoreError saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"{store}: PostgreSQL stores need psycopg 3: pip install 'dataidx[postgres]'") from None
    return psycopg


def connect(store: PostgresStore, *, read_only: bool = True, autocommit: bool = True) -> Any:
    """A psycopg connection to the store's database with ``search_path`` set to its schema."""
    psycopg = require_psycopg(store)

    try:
        given = psycopg.conninfo.conninfo_to_dict(store.conninfo)
        # Ours come after the URL's own options (a statement_timeout, say): both apply.
        options = " ".join(filter(None, [given.get("options"), f'-c search_path="{store.schema}"',
                                         "-c default_transaction_read_only=on" if read_only else ""]))
        connection = psycopg.connect(**{"connect_timeout": 30, **given, "options": options,
                                        "autocommit": autocommit})
    except psycopg.Error as exc:
        raise StoreError(f"{store}: cannot connect: {first_line(exc)}") from None
    # JSON columns arrive as text, as they do from SQLite: one decoding path for both.
    for name in ("json", "jsonb"):
        connection.adapters.register_loader(name, psycopg.types.string.TextLoader)
    return connection


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresReadConnection:
    """A read-only connection to a store in PostgreSQL that answers the SQLite reader's SQL."""

    dialect = "postgresql"

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.raw = connect(store)

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        """Run a read; a connection the server dropped (a restart, a terminated backend) is
        opened again once, so a training run outlives a server restart."""
        import psycopg

        sql = sql.replace(*_ID_LIST).replace("?", "%s")
        try:
            try:
                return self.raw.execute(sql, parameters)
            except psycopg.OperationalError:
                if not self.raw.closed:
                    raise
                self.raw = connect(self.store)  # reads are stamp-checked: a new store is noticed
                return self.raw.execute(sql, parameters)
        except psycopg.Error as exc:
            raise StoreError(f"{self.store}: cannot read store: {first_line(exc)}") from None

    def close(self) -> None:
        self.raw.close()



def connect_readonly(store: PostgresStore) -> tuple[PostgresReadConnection, str | None]:
    """A read connection and the store's schema revision; a StoreError if there is no store."""
    connection = PostgresReadConnection(store)
    try:
        found = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = ? AND tablename IN ('alembic_version', ?)",
            (store.schema, STAMP_TABLE)).fetchone()[0]
        if found != 2:
            raise StoreError(f"{store}: no dataidx store in schema '{store.schema}' "
                             "(build one with: dataidx build CONFIG -o URL)")
        if not connection.execute("SELECT has_schema_privilege(?, 'USAGE')", (store.schema,)).fetchone()[0]:
            raise StoreError(f"{store}: role {connection.raw.info.user} may not read schema '{store.schema}' "
                             f"(GRANT USAGE ON SCHEMA {store.schema} TO ...; see docs/postgres.md)")
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except BaseException:
        connection.close()
        raise
    return connection, (row[0] if row else None)


def read_stamp(connection: PostgresReadConnection) -> int:
    return connection.execute(f"SELECT stamp FROM {STAMP_TABLE}").fetchone()[0]


def run_query(store: PostgresStore, sql: str, parameters: dict[str, Any] | None) -> tuple[list[str], list[tuple]]:
    """One SELECT in a read-only transaction, rolled back; ``:name`` parameters as in SQLite.

    Sent as a prepared statement (extended protocol), so a second statement is refused. A
    read-only transaction stops writes to the database; what a privileged role may do outside
    it (server functions) is bounded by the role, hence the read-only role in docs/postgres.md.
    """
    import psycopg
    from sqlalchemy import text
    from sqlalchemy.dialects.postgresql import psycopg as dialect

    if _first_keyword(sql) not in ("select", "with", "values", "table"):
        raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run")
    compiled = text(sql).compile(dialect=dialect.dialect())
    statement, values = sql, None  # without parameters the SQL goes as written (':x' literals too)
    if parameters:
        missing = sorted(set(compiled.params) - set(parameters))
        if missing:
            raise DataidxError(f"query failed: no value for parameter(s) {', '.join(missing)} (use --param NAME=VALUE)")
        statement, values = str(compiled), {name: parameters[name] for name in compiled.params}
    connection = connect(store, autocommit=False)
    try:
        connection.execute("SET TRANSACTION READ ONLY")
        cursor = connection.execute(statement, values, prepare=True)
        rows = [tuple(_plain(value) for value in row) for row in cursor.fetchall()] if cursor.description else []
        columns = [column.name for column in cursor.description or []]
    except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege) as exc:
        raise ReadOnlyError(f"query refused: the store is read-only here; only SELECT statements run "
                            f"({first_line(exc)})") from None
    except psycopg.errors.SyntaxError as exc:
        if "multiple commands" in str(exc):
            raise DataidxError("query refused: one statement at a time") from None
        hint = f" (no value for parameter(s) {', '.join(compiled.params)}: use --param NAME=VALUE)" \
            if compiled.params and not parameters else ""
        raise DataidxError(f"query failed: {first_line(exc)}{hint}") from None
    except psycopg.Error as exc:
        raise DataidxError(f"query failed: {first_line(exc)}") from None
    finally:
        connection.rollback()
        connection.close()
    return columns, rows


_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/|\()*([A-Za-z]*)", re.S)


def _first_keyword(sql: str) -> str:
    """The statement's first word, past whitespace, comments and parentheses."""
    return _FIRST_WORD.match(sql).group(1).lower()


def _plain(value: Any) -> Any:
    """PostgreSQL's numeric arrives as Decimal; JSON output and comparisons want int or float."""
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return float(value)
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    return value

"""Reading a store that lives in a PostgreSQL schema: connections, revision and stamp.

Every read connection is read-only at the server (``default_transaction_read_only``) and has the
store's schema as its only ``search_path``, so the read path's SQL, spelled in
:data:`POSTGRES`, runs here as it runs on a file. Writing goes through :mod:`.publish`.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import StaleStoreError, StoreError
from ..dialect import REVISIONS_READ, Dialect
from ..location import PostgresStore
from ..sqlite.objects import Objects, compared, expected_objects

#: Table that marks a schema as a dataidx store and holds its identity (SQLite's user_version).
STAMP_TABLE = "dataidx_store"
POSTGRES = Dialect(mark="%s",
                   ids="SELECT CAST(value AS bigint) FROM json_array_elements_text(%s::json)",
                   stamped=f"(SELECT stamp FROM {STAMP_TABLE}), ", int_list="string_agg(CAST({} AS text), ',')")


#: The schema's relations (tables, views and their kin), and what each kind is called in messages.
_RELATIONS = ("SELECT c.relname, c.relkind FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
              "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')")
_KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table"}


def require_psycopg(store: PostgresStore) -> Any:
    """The psycopg module, or a StoreError saying how to install it."""
    try:
        import psycopg  # here, not at import: an optional extra, and only PostgreSQL stores need it
    except ImportError:
        raise StoreError(f"{store}: PostgreSQL stores need psycopg 3: pip install 'dataidx[postgres]'") from None
    return psycopg


def postgres_conninfo(store: PostgresStore) -> str:
    """The store's URL as a libpq connection string (``host=... dbname=... options=...``)."""
    from psycopg.conninfo import make_conninfo  # here, not at import: an optional extra
    from sqlalchemy.engine import make_url

    url = make_url(store.url)
    given = {"host": url.host, "port": url.port, "user": url.username, "password": url.password,
             "dbname": url.database}
    given.update({key: value if isinstance(value, str) else value[-1] for key, value in url.query.items()})
    return make_conninfo("", **{key: value for key, value in given.items() if value is not None})


def connect(store: PostgresStore, *, read_only: bool = True, autocommit: bool = True) -> Any:
    """A psycopg connection to the store's database with ``search_path`` set to its schema."""
    psycopg = require_psycopg(store)
    try:
        given = psycopg.conninfo.conninfo_to_dict(postgres_conninfo(store))
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


def plain_number(value: decimal.Decimal) -> int | float:
    """PostgreSQL's numeric (``sum`` of integers, ``round``) as SQLite answers it: an int when
    whole, else a float; so a read means the same on both backends."""
    if not value.is_finite():
        return float(value)
    exponent = value.as_tuple().exponent
    return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)


def read_connection(store: PostgresStore) -> Any:
    """:func:`connect`, read-only, with numerics loaded as :func:`plain_number` says."""
    psycopg = require_psycopg(store)

    class PlainNumberLoader(psycopg.adapt.Loader):
        def load(self, data: Any) -> int | float:
            return plain_number(decimal.Decimal(bytes(data).decode()))

    connection = connect(store)
    connection.adapters.register_loader("numeric", PlainNumberLoader)
    return connection


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresReadConnection:
    """A read-only connection to a store in PostgreSQL (see :class:`~dataidx.store.dialect.ReadConnection`)."""

    dialect = POSTGRES

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.psycopg = require_psycopg(store)
        self.raw = read_connection(store)
        self.opened_stamp: int | None = None
        #: Called when a fetch finds a new stamp (another write swapped the schema): returns if
        #: what the caller reads is unchanged, raises StaleStoreError if not. None: always refuse.
        self.on_new_stamp: Callable[[], None] | None = None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        """Run a read; a connection the server dropped (a restart, a terminated backend) is
        opened again once, so a training run outlives a server restart."""
        psycopg = self.psycopg
        try:
            try:
                return self.raw.execute(sql, parameters)
            except psycopg.OperationalError:
                if not self.raw.closed:
                    raise
                self.raw = read_connection(self.store)  # fetches are stamp-checked: a new store is noticed
                return self.raw.execute(sql, parameters)
        except psycopg.Error as exc:
            raise StoreError(f"{self.store}: cannot read store: {first_line(exc)}") from None

    def fetch(self, sql: str, parameters: Sequence[Any], /) -> list[tuple[Any, ...]]:
        """The schema is swapped in place by a write, so every fetch reads the stamp in the same
        statement; an empty answer asks for it, so no answer is ever another store's."""
        found = self.execute(sql, parameters).fetchall()
        stamp = found[0][0] if found else self._current_stamp()
        if stamp != self.opened_stamp:
            if self.on_new_stamp is None:
                raise StaleStoreError.replaced(self.store)
            self.on_new_stamp()  # what this reader reads is the same in the new schema, or it raises
            self.opened_stamp = stamp
        return [row[1:] for row in found]

    def _current_stamp(self) -> int:
        return self.execute(f"SELECT stamp FROM {STAMP_TABLE}").fetchone()[0]

    def stamp(self) -> int:
        stamp = self.execute(f"SELECT stamp FROM {STAMP_TABLE}").fetchone()[0]
        if self.opened_stamp is None:
            self.opened_stamp = stamp
        return stamp

    def integrity(self) -> list[str]:
        return []  # the server checks its own pages

    def replaced_objects(self) -> list[str]:
        # Tables and views by name and kind only: PostgreSQL keeps a view's text as it reads it
        # back, and publishing names indexes its own way.
        expected: Objects = {**{key: None for key in expected_objects() if key[0] in ("table", "view")},
                             ("table", STAMP_TABLE): None}
        found: Objects = {(_KINDS[kind], name): None for name, kind in self.execute(_RELATIONS, (self.store.schema,))}
        return compared(found, expected)[0]

    def tune_for_fetches(self) -> None:
        pass

    def close(self) -> None:
        self.raw.close()


def open_postgres(store: PostgresStore) -> tuple[PostgresReadConnection, list[str]]:
    """A read connection and the schema revisions the store records (one; two say it was
    altered); a StoreError if there is no store."""
    connection = PostgresReadConnection(store)
    try:
        found = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename IN ('alembic_version', %s)",
            (store.schema, STAMP_TABLE)).fetchone()[0]
        if found != 2:
            raise StoreError(f"{store}: no dataidx store in schema '{store.schema}' "
                             "(build one with: dataidx build CONFIG -o URL)")
        if not connection.execute("SELECT has_schema_privilege(%s, 'USAGE')", (store.schema,)).fetchone()[0]:
            raise StoreError(f"{store}: role {connection.raw.info.user} may not read schema '{store.schema}' "
                             f"(GRANT USAGE ON SCHEMA {store.schema} TO ...; see docs/postgres.md)")
        rows = connection.execute(REVISIONS_READ).fetchall()
        connection.stamp()  # what every later fetch must find
    except BaseException:
        connection.close()
        raise
    return connection, [row[0] for row in rows]

"""``dataidx query`` on a store in PostgreSQL: one SELECT in a read-only transaction, rolled back."""

from __future__ import annotations

import re
from typing import Any

from ...errors import ReadOnlyError, UsageError
from ..sqlite.bounds import past_answer, row_bytes
from .read import PostgresReadConnection, first_line


def query_postgres(connection: PostgresReadConnection, sql: str, parameters: dict[str, Any] | None, *,
                   timeout: float | None = None, limit: int | None = None) -> tuple[list[str], list[tuple]]:
    """One SELECT in a read-only transaction on ``connection``, rolled back; ``:name``
    parameters as in SQLite; at most ``limit + 1`` rows, holding at most the memory a file's
    answer may; stopped by the server after ``timeout`` seconds (psycopg cancels it on the
    server at Ctrl-C).

    Sent as a prepared statement (extended protocol), so a second statement is refused. A
    read-only transaction stops writes to the database; what a privileged role may do outside
    it (server functions) is bounded by the role, hence the read-only role in docs/postgres.md.
    JIT compilation is off (below).
    """
    import psycopg  # here, not at import: an optional extra
    from sqlalchemy import text
    from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect

    if _first_keyword(sql) not in ("select", "with", "values", "table"):
        raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run")
    compiled = text(sql).compile(dialect=psycopg_dialect())
    statement, values = sql, None  # without parameters the SQL goes as written (':x' literals too)
    if parameters:
        missing = sorted(set(compiled.params) - set(parameters))
        if missing:
            raise UsageError(f"query failed: no value for parameter(s) {', '.join(missing)} (use --param NAME=VALUE)")
        statement, values = str(compiled), {name: parameters[name] for name in compiled.params}
    raw = connection.raw
    try:
        with raw.transaction():  # rolled back by the Rollback at its end: nothing it did stays
            raw.execute("SET TRANSACTION READ ONLY")
            # JIT compiles any plan whose estimated cost is high, and a store's estimates run high
            # (a mixture's spans are estimated from the average mixture): 0.5-2.4 s of compiling
            # for a cookbook query that runs in milliseconds.
            raw.execute("SET LOCAL jit = off")
            if timeout:
                raw.execute(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")
            # A server-side cursor (declared with the extended protocol, so one statement): the
            # answer comes a batch at a time, counted as it comes, and stops at the memory a
            # file's answer may hold; a client cursor held the whole answer before it returned.
            rows, held = [], 0
            with raw.cursor(name="dataidx_query") as cursor:
                cursor.execute(statement, values)
                while batch := cursor.fetchmany(_BATCH if limit is None else min(_BATCH, limit + 1 - len(rows))):
                    for row in batch:
                        held += row_bytes(row)
                        if (refused := past_answer(held, len(rows))) is not None:
                            raise UsageError(f"query refused: {refused}")
                        rows.append(tuple(row))  # numerics come as SQLite's (see read_connection)
                columns = [column.name for column in cursor.description or []]
            raise psycopg.Rollback()
    except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege) as exc:
        raise ReadOnlyError(f"query refused: the store is read-only here; only SELECT statements run "
                            f"({first_line(exc)})") from None
    except psycopg.errors.FeatureNotSupported as exc:  # a cursor refuses a data-modifying WITH first
        if "data-modifying" not in str(exc):
            raise UsageError(f"query failed: {first_line(exc)}") from None
        raise ReadOnlyError("query refused: the store is read-only here; only SELECT statements run "
                            f"({first_line(exc)})") from None
    except psycopg.errors.QueryCanceled:
        raise UsageError(f"query stopped after {timeout:g} s (--timeout; 0 for none)") from None
    except psycopg.errors.SyntaxError as exc:
        if "multiple commands" in str(exc):
            raise UsageError("query refused: one statement at a time") from None
        hint = f" (no value for parameter(s) {', '.join(compiled.params)}: use --param NAME=VALUE)" \
            if compiled.params and not parameters else ""
        raise UsageError(f"query failed: {first_line(exc)}{hint}") from None
    except psycopg.Error as exc:
        raise UsageError(f"query failed: {first_line(exc)}") from None
    return columns, rows


#: Rows an answer fetches from the server at a time.
_BATCH = 256
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/|\()*([A-Za-z]*)", re.S)


def _first_keyword(sql: str) -> str:
    """The statement's first word, past whitespace, comments and parentheses."""
    found = _FIRST_WORD.match(sql)  # every part of it is optional: it always matches
    return found.group(1).lower() if found else ""

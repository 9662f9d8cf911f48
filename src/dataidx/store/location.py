"""Where a store lives: a SQLite file (a path or ``sqlite:///`` URL) or a PostgreSQL schema.

Every command and ``DataEngine`` take the store as one string; this module turns it into a
``Path`` or a :class:`PostgresStore`, and ``connect``, ``write`` and ``query`` choose the backend
by which of the two it is. A PostgreSQL store is a schema (``?schema=NAME``, default
``dataidx``) in the database a SQLAlchemy URL names, so a team shares mixtures across machines.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ..errors import StoreError, hide_passwords
from ..paths import cache_dir

DEFAULT_SCHEMA = "dataidx"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
_POSTGRES_DRIVERS = ("postgresql", "postgresql+psycopg", "postgres")


@dataclass(frozen=True)
class PostgresStore:
    """A store in schema ``schema`` of the PostgreSQL database at ``url`` (psycopg 3 driver)."""

    url: str = field(repr=False)  # SQLAlchemy URL, password included, without the ``schema`` key
    schema: str
    shown: str  # the URL as given, less its password: what messages print

    def __str__(self) -> str:
        return self.shown


def is_url(store: str | os.PathLike[str] | PostgresStore) -> bool:
    return isinstance(store, PostgresStore) or (isinstance(store, str) and "://" in store)


def store_location(store: str | os.PathLike[str] | PostgresStore) -> Path | PostgresStore:
    """A path for a SQLite store, or the PostgreSQL schema a URL names; a clear error otherwise."""
    if isinstance(store, PostgresStore):
        return store
    if not is_url(store):
        return Path(store)
    text = os.fspath(store)  # a URL is a str
    # Here, not at import: only a URL needs SQLAlchemy's parser, and reading a file never does.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text)
    except ArgumentError:
        raise StoreError(f"{text}: not a store path or a SQLAlchemy URL") from None
    if url.drivername == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StoreError(f"{text}: a SQLite store needs a file (sqlite:///path/store.db)")
        return Path(url.database)
    shown = hide_passwords(text)  # as the user wrote it, less the password
    if url.drivername not in _POSTGRES_DRIVERS:
        raise StoreError(f"{shown}: unsupported database '{url.drivername}'; dataidx stores live in SQLite "
                         "(a path or sqlite:///path) or PostgreSQL (postgresql://... with psycopg 3)")
    # SQLAlchemy drops a key without a value: an empty ?schema= would quietly mean the default.
    if "schema" not in url.query and "schema" in parse_qs(urlsplit(text).query, keep_blank_values=True):
        raise StoreError(f"{shown}: ?schema= names no schema; give the store's (?schema=NAME), or leave the key "
                         f"out for '{DEFAULT_SCHEMA}'")
    schema = url.query.get("schema", DEFAULT_SCHEMA)
    if schema in ("public", "information_schema"):
        raise StoreError(f"{shown}: schema '{schema}' belongs to the database; give the store its own "
                         "(?schema=NAME): a write replaces the store's whole schema")
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise StoreError(f"{shown}: schema {schema!r} is not a plain lower-case name (letters, digits, _; "
                         "at most 40 characters)")
    clean = url.difference_update_query(["schema"]).set(drivername="postgresql+psycopg")
    return PostgresStore(clean.render_as_string(hide_password=False), schema, shown)


def streams_folder(location: Path | PostgresStore) -> Path:
    """Where a store's streaming sources are materialised: ``<store>.streams`` beside a file; in
    the dataidx cache folder of the building machine for a store in PostgreSQL."""
    if isinstance(location, PostgresStore):
        key = hashlib.sha256(f"{location.shown}|{location.schema}".encode()).hexdigest()[:16]
        return cache_dir() / "postgres-streams" / key
    location = location.resolve()
    return location.with_name(location.name + ".streams")


def tokens_folder(location: Path | PostgresStore) -> Path:
    """Where a store's token files are written by default: ``<store>.tokens`` beside a file (move
    it with the store); for a store in PostgreSQL, the dataidx cache folder of the rendering
    machine (``dataidx render --tokens-dir`` puts them on storage every reader mounts)."""
    if isinstance(location, PostgresStore):
        key = hashlib.sha256(f"{location.shown}|{location.schema}".encode()).hexdigest()[:16]
        return cache_dir() / "postgres-tokens" / key
    location = location.resolve()
    return location.with_name(location.name + ".tokens")

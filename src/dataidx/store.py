"""Create, open and check store files: the only place that knows how a store is laid on disk.

A store is a SQLite file whose schema Alembic created. Opening never runs Alembic (it is slow
to import); it reads ``alembic_version`` and compares it with :data:`SCHEMA_REVISION`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event

from .errors import StoreError
from .schema import REVISIONS, SCHEMA_REVISION

SQLITE_HEADER = b"SQLite format 3\x00"


def migrations_dir() -> str:
    """The Alembic script folder, wherever the package is installed (shipped in the wheel)."""
    return str(resources.files("dataidx._migrations"))


def alembic_config(engine_connection) -> "alembic.config.Config":  # noqa: F821
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", migrations_dir())
    config.attributes["connection"] = engine_connection
    return config


def store_revision(path: str | os.PathLike[str]) -> str | None:
    """The schema revision recorded in a store file, after checking it is a SQLite file."""
    path = Path(path)
    check_store_file(path)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            raise StoreError(f"{path}: not a dataidx store (no schema version)") from None
        raise StoreError(f"{path}: cannot read store: {exc}") from None
    return row[0] if row else None


@contextmanager
def rewriting(path: str | os.PathLike[str]) -> Iterator[Connection]:
    """A transaction on a copy of a current store, renamed over it only if the block succeeds.

    Readers that already have the store open keep reading the old file; new opens see the new
    one; an error or a kill mid-way leaves the store as it was.
    """
    connect_readonly(path).close()
    with _on_copy(Path(path)) as connection:
        yield connection


def migrate_store(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """Upgrade a store to the newest schema on a copy, then rename it into place.

    Returns the revisions before and after; a store already current is left untouched.
    """
    from alembic import command

    before = store_revision(path)
    if before == SCHEMA_REVISION:
        return before, before
    if before not in REVISIONS:
        raise StoreError(f"{path}: store schema revision {before!r} is unknown to this dataidx; upgrade dataidx")
    with _on_copy(Path(path)) as connection:
        command.upgrade(alembic_config(connection), "head")
    return before, SCHEMA_REVISION


@contextmanager
def _on_copy(path: Path) -> Iterator[Connection]:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    shutil.copyfile(path, temporary)
    try:
        engine = create_engine(f"sqlite:///{temporary}")
        _set_build_pragmas(engine)
        try:
            with engine.begin() as connection:
                yield connection
        finally:
            engine.dispose()
        os.replace(temporary, path)
    except BaseException:
        remove_temporary(temporary)
        raise


def remove_temporary(path: Path) -> None:
    """Remove a temporary store file and its rollback journal, if they exist."""
    for candidate in (path, path.with_name(path.name + "-journal")):
        try:
            candidate.unlink()
        except FileNotFoundError:
            pass


def create_store(path: str | os.PathLike[str]) -> Engine:
    """A new store at ``path`` (which must not exist), its schema created by the migrations."""
    from alembic import command

    engine = create_engine(f"sqlite:///{os.fspath(path)}")
    _set_build_pragmas(engine)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "head")
    return engine


def _set_build_pragmas(engine: Engine) -> None:
    # The file is temporary until renamed into place, so durability per statement buys nothing.
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def connect_readonly(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only DBAPI connection to a checked store; raises StoreError naming the problem."""
    path = Path(path)
    check_store_file(path)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            raise StoreError(f"{path}: not a dataidx store (no schema version)") from None
        raise StoreError(f"{path}: cannot read store: {exc}") from None
    revision = row[0] if row else None
    if revision != SCHEMA_REVISION:
        connection.close()
        if revision in REVISIONS:
            raise StoreError(
                f"{path}: store schema revision {revision!r} is older than {SCHEMA_REVISION!r}; "
                f"upgrade it with: dataidx migrate {path}"
            )
        raise StoreError(
            f"{path}: store schema revision {revision!r} is unknown to this dataidx (newest {SCHEMA_REVISION!r}); "
            "it was made by a newer dataidx: upgrade dataidx"
        )
    return connection


def readonly_engine(path: str | os.PathLike[str]) -> Engine:
    """A SQLAlchemy engine over read-only connections to the store at ``path``."""
    connect_readonly(path).close()  # fail now, with a clear message, not at first query
    return create_engine("sqlite://", creator=lambda: connect_readonly(path))


def check_store_file(path: Path) -> None:
    if not path.exists():
        raise StoreError(f"{path}: store not found")
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file")
    with path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise StoreError(f"{path}: not a dataidx store (not a SQLite file)")

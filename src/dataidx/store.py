"""Create, rewrite and migrate store files through SQLAlchemy and Alembic.

Reading a store needs none of this (see :mod:`dataidx.storefile`); writing always happens on a
temporary file renamed into place when complete, or, for a store in PostgreSQL, published into
its schema when complete (see :mod:`dataidx.pg_publish`).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event

from .errors import StoreError
from .locations import PostgresStore, is_url, store_location
from .storefile import REVISIONS, SCHEMA_REVISION, connect_readonly, store_revision


def migrations_dir() -> str:
    """The Alembic script folder, wherever the package is installed (shipped in the wheel)."""
    return str(resources.files("dataidx._migrations"))


def alembic_config(engine_connection) -> "alembic.config.Config":  # noqa: F821
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", migrations_dir())
    config.attributes["connection"] = engine_connection
    return config


@contextmanager
def rewriting(path: str | os.PathLike[str]) -> Iterator[Connection]:
    """A transaction on a copy of a current store, renamed over it only if the block succeeds;
    one writer at a time.

    Readers that already have the store open keep reading the old file; new opens see the new
    one; an error or a kill mid-way leaves the store as it was.
    """
    connect_readonly(path).close()
    location = store_location(path) if is_url(path) else Path(path)
    if isinstance(location, PostgresStore):
        with _on_postgres_copy(location) as connection:
            yield connection
        return
    with _on_copy(location) as connection:
        yield connection


@contextmanager
def _on_postgres_copy(store: PostgresStore) -> Iterator[Connection]:
    """The same transaction on a local copy of a store in PostgreSQL, published back after."""
    from .pg_publish import postgres_writer, publish, pull, working_folder

    with postgres_writer(store) as server, working_folder() as folder:
        working_copy = folder / "store.db"
        pull(store, server, working_copy)
        with _stamped_transaction(working_copy) as connection:
            yield connection
        publish(working_copy, store, server)


@contextmanager
def _stamped_transaction(file: Path) -> Iterator[Connection]:
    """One transaction on a working copy that gives it a new stamp when the block succeeds."""
    engine = create_engine(f"sqlite:///{file}")
    _set_build_pragmas(engine)
    try:
        with engine.begin() as connection:
            yield connection
            stamp(connection)
    finally:
        engine.dispose()


def migrate_store(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """Upgrade a store to the newest schema on a copy, then rename it into place.

    Returns the revisions before and after; a store already current is left untouched.
    """
    from alembic import command

    before = store_revision(path)
    if before == SCHEMA_REVISION:
        return before, before
    if is_url(path) and isinstance(store_location(path), PostgresStore):
        raise StoreError(f"{path}: store schema revision {before!r} cannot be upgraded in PostgreSQL by this "
                         f"dataidx (it writes {SCHEMA_REVISION!r}); rebuild the store")
    if before not in REVISIONS:
        raise StoreError(f"{path}: store schema revision {before!r} is unknown to this dataidx; upgrade dataidx")
    with _on_copy(Path(path)) as connection:
        command.upgrade(alembic_config(connection), "head")
    return before, SCHEMA_REVISION


@contextmanager
def _on_copy(path: Path) -> Iterator[Connection]:
    if not os.access(path.parent, os.W_OK):
        raise StoreError(f"{path}: folder {path.parent} is not writable")
    with writer_lock(path):
        remove_stale_temporaries(path)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(path, temporary)
            with _stamped_transaction(temporary) as connection:
                yield connection
            publish(temporary, path)
        except OSError as exc:
            remove_temporary(temporary)
            raise StoreError(f"{path}: cannot write: {exc}") from None
        except BaseException:
            remove_temporary(temporary)
            raise


def refuse_to_overwrite(target: Path) -> None:
    """A build replaces an existing store, never another kind of file (``-o data.json``)."""
    if not target.exists():
        return
    try:
        store_revision(target)
    except StoreError:
        raise StoreError(f"{target} exists and is not a dataidx store; refusing to overwrite it") from None


def remove_stale_temporaries(target: Path) -> None:
    """Remove temporary files that killed writers left beside ``target`` (their pid is gone)."""
    for candidate in target.parent.glob(f".{target.name}.*.tmp"):
        pid = candidate.name[len(target.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            remove_temporary(candidate)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_temporary(path: Path) -> None:
    """Remove a temporary store file and its rollback journal, if they exist."""
    for candidate in (path, path.with_name(path.name + "-journal")):
        try:
            candidate.unlink()
        except FileNotFoundError:
            pass


def create_store(path: str | os.PathLike[str]) -> Engine:
    """A new store at ``path`` (which must not exist), with the schema the migrations create.

    The schema comes from ``schema.sql``, the migrations' result recorded once (a test checks
    it is exactly what running them gives): creating a store then costs milliseconds instead of
    importing Alembic and running every migration, a tenth of a build's wall time.
    """
    # The build writes from a worker thread while the main thread prepares the next dataset.
    engine = create_engine(f"sqlite:///{os.fspath(path)}", connect_args={"check_same_thread": False})
    _set_build_pragmas(engine)
    raw = engine.raw_connection()
    try:
        raw.driver_connection.executescript(resources.files("dataidx").joinpath("schema.sql").read_text())
    finally:
        raw.close()
    return engine


def migrated_schema(path: str | os.PathLike[str]) -> str:
    """The schema script of a new store made by running every migration (``schema.sql``)."""
    from alembic import command

    engine = create_engine(f"sqlite:///{os.fspath(path)}")
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "head")
            statements = connection.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").scalars().all()
            revision = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    finally:
        engine.dispose()
    lines = ["-- Generated by scripts/snapshot_schema.py from the Alembic migrations; do not edit."]
    lines += [statement.strip() + ";" for statement in statements]
    lines.append(f"INSERT INTO alembic_version (version_num) VALUES ('{revision}');")
    return "\n".join(lines) + "\n"


def _set_build_pragmas(engine: Engine) -> None:
    # The file is temporary until it is synced and renamed into place, so per-statement
    # durability and an on-disk journal buy nothing; the writer checks its own references.
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in ("synchronous = OFF", "journal_mode = MEMORY", "cache_size = -65536", "temp_store = MEMORY"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()


def stamp(connection: Connection) -> None:
    """Give the store being written a new identity (SQLite's ``user_version`` header field).

    Readers remember it when they open a store and check it whenever a process reconnects, so a
    DataLoader worker never applies an old layout to a store replaced in the meantime.
    """
    connection.exec_driver_sql(f"PRAGMA user_version = {secrets.randbelow(2**31 - 1) + 1}")


@contextmanager
def writer_lock(target: Path) -> Iterator[None]:
    """One writer at a time: mix, remove-mixture, migrate and build read, change and replace a
    whole file, so two at once would silently lose one's change. The lock is on the store's
    folder (no lock file is left behind; writers of other stores there wait their turn) and the
    OS releases it even when the holder is killed."""
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # closing releases the lock


def publish(temporary: Path, target: Path) -> None:
    """Flush a finished temporary store to disk, then rename it over ``target`` atomically."""
    with temporary.open("rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, target)



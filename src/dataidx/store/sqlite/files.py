"""Writing store files safely: a new file is filled aside and renamed over the old one.

Every write (build, mix, render, pack, the removes, migrate) works on a temporary file beside
the store, synced and renamed into place only when complete, under a lock on the folder: a
failure or a kill leaves the store as it was, and readers that have it open keep reading it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from ...errors import DataidxError, StoreError, UsageError
from ..schema import schema_script
from .objects import disarm
from .read import open_file


def file_engine(path: str | os.PathLike[str], *, check_same_thread: bool = True) -> Engine:
    """An engine on the SQLite file at ``path``, whatever its name holds: a ``sqlite:///`` URL
    would read ``?`` and ``%xx`` in a file name as URL syntax."""
    name = os.fspath(path)
    return create_engine("sqlite://", poolclass=QueuePool,
                         creator=lambda: sqlite3.connect(name, check_same_thread=check_same_thread))


def real_path(path: Path) -> Path:
    """The file a store path names, through any symbolic links: a write replaces the file the
    link points at, never the link itself."""
    return Path(os.path.realpath(path))


def create_store(path: str | os.PathLike[str]) -> Engine:
    """A new store at ``path`` (which must not exist), with the schema the migrations create.

    The schema comes from ``schema.sql``, the migrations' result recorded once (a test checks
    it is exactly what running them gives): creating a store then costs milliseconds instead of
    importing Alembic and running every migration, a tenth of a build's wall time.
    """
    # The build writes from a worker thread while the main thread prepares the next dataset.
    engine = file_engine(path, check_same_thread=False)
    _set_build_pragmas(engine)
    raw = engine.raw_connection()
    try:
        driver_of(raw).executescript(schema_script())
    finally:
        raw.close()
    return engine


def driver_of(pooled: PoolProxiedConnection) -> Any:
    """The DBAPI driver's own connection (sqlite3's, psycopg's) under a pooled one that is open."""
    driver = pooled.driver_connection
    assert driver is not None  # None only after the pooled connection is closed or invalidated
    return driver


def _set_build_pragmas(engine: Engine) -> None:
    # The file is temporary until it is synced and renamed into place, so per-statement
    # durability and a journal buy nothing: a write that fails discards the file, it never rolls
    # back in it. Even a journal in memory held every page a write changed: replacing a plan of
    # 20M members held 400 MB more, removing one 500 MB. The writer checks its own references.
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in ("synchronous = OFF", "journal_mode = OFF", "cache_size = -65536", "temp_store = MEMORY"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()


def renew_stamp(connection: Connection) -> None:
    """Give the store being written a new identity (SQLite's ``user_version`` header field).

    Readers remember it when they open a store and check it whenever a process reconnects, so a
    DataLoader worker never applies an old layout to a store replaced in the meantime.
    """
    connection.exec_driver_sql(f"PRAGMA user_version = {secrets.randbelow(2**31 - 1) + 1}")


@contextmanager
def stamped_transaction(file: Path, shown_as: Path | None = None) -> Iterator[Connection]:
    """One transaction on a working copy that gives it a new stamp when the block succeeds; a
    trigger or an altered view in the copy is dropped or refused first (see :mod:`.objects`)."""
    engine = file_engine(file)
    _set_build_pragmas(engine)
    try:
        with engine.begin() as connection:
            disarm(_rows_of(connection), shown_as or file)
            yield connection
            renew_stamp(connection)
    finally:
        engine.dispose()


def _rows_of(connection: Connection) -> Callable[[str], Sequence[Any]]:
    """Run SQL on ``connection``: its rows, or none for a statement that returns none."""

    def execute(sql: str) -> Sequence[Any]:
        result = connection.exec_driver_sql(sql)
        return result.fetchall() if result.returns_rows else []
    return execute


@contextmanager
def rewritten_copy(path: Path, meanwhile: Callable[[], object] | None = None) -> Iterator[Connection]:
    """A transaction on a copy of the store file, renamed over it if the block succeeds.
    ``meanwhile`` runs in this thread while the file is copied (see :func:`alongside`)."""
    path = real_path(path)
    check_writable(path)
    with writer_lock(path):
        remove_stale_temporaries(path)
        temporary = temporary_beside(path)
        try:
            with disk_errors(path):
                alongside(lambda: shutil.copyfile(path, temporary), meanwhile)
                with stamped_transaction(temporary, path) as connection:
                    yield connection
                replace_file(temporary, path)
        except BaseException:
            remove_temporary(temporary)
            raise


def alongside(task: Callable[[], object], meanwhile: Callable[[], object] | None) -> None:
    """Run ``task`` in a thread while ``meanwhile`` runs in this one; either's error is raised
    once both are done. Copying a store is the kernel's work (``sendfile`` lets go of the GIL):
    a 2 GB store copies in 1-13 s, time a writer can spend planning what it writes."""
    if meanwhile is None:
        task()
        return
    with ThreadPoolExecutor(1, thread_name_prefix="dataidx-copy") as pool:
        done = pool.submit(task)
        try:
            meanwhile()
        finally:
            wait([done])
        done.result()


#: What SQLite says when the disk, a quota or a file size limit stops a write.
_DISK_MESSAGES = ("disk i/o error", "database or disk is full", "unable to open database file", "readonly database")


@contextmanager
def disk_errors(path: Path) -> Iterator[None]:
    """Writing ``path``: a full disk, a file size limit or a refusal from the file system is one
    StoreError naming the store, not a traceback (the store itself is left as it was)."""
    try:
        yield
    except DataidxError:
        raise
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except (sqlite3.OperationalError, OperationalError) as exc:
        cause = getattr(exc, "orig", exc)
        if not any(message in str(cause).lower() for message in _DISK_MESSAGES):
            raise
        raise StoreError(f"{path}: cannot write: {cause} (a full disk, a quota or a file size limit?)") from None


def check_writable(target: Path) -> None:
    """A UsageError unless a store file can be written at ``target`` (by a rename in its folder)."""
    if target.is_dir():
        raise UsageError(f"{target}: is a folder; give the store's file name")
    if target.exists() and not target.is_file():
        raise UsageError(f"{target}: is not a regular file (a FIFO or a device?); give the store's file name")
    if not target.parent.is_dir():
        raise UsageError(f"{target}: folder {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise UsageError(f"{target}: folder {target.parent} is not writable")


def temporary_beside(target: Path) -> Path:
    """This process's temporary file for ``target``, in its folder (so the rename is atomic)."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def refuse_to_overwrite(target: Path) -> None:
    """A build replaces an existing store, never another kind of file (``-o data.json``)."""
    if not target.exists():
        return
    try:
        open_file(target)[0].close()
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


def replace_file(temporary: Path, target: Path) -> None:
    """Flush a finished temporary store to disk, then rename it over ``target`` atomically."""
    with temporary.open("rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, target)

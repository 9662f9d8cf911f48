"""Reading a store file: sqlite3 alone, opened read-only, so opening one costs milliseconds.

Neither SQLAlchemy nor Alembic is imported here (together a third of a second): ``dataidx info``
and every DataLoader worker start from this module.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import StoreError
from ..dialect import REVISIONS_READ, Dialect
from .objects import replaced_objects, schema_problems

SQLITE = Dialect(mark="?", ids="SELECT value FROM json_each(?)", stamped="",
                 int_list="group_concat({})")
SQLITE_HEADER = b"SQLite format 3\x00"
#: Pages come through a shared memory map; a small private cache keeps DataLoader workers lean.
MMAP_BYTES = 1 << 40
CACHE_KIB = 256
#: Seconds a connection's reads may take from its open before they are stopped: a crafted view (a
#: recursive CTE) would run forever. Generous, because a pass over 20M positions (compose under
#: another spec, pack's lengths, a budget draw) is minutes of honest reads; Ctrl-C stops any sooner.
READ_SECONDS = 600.0
#: SQLite virtual machine steps between two looks at the clock: a fetch (a rowid lookup, a few
#: hundred steps) never reaches one.
WATCH_STEPS = 10_000


class Watch:
    """Every read connection's progress handler: stops its statements once ``deadline`` (on
    ``time.monotonic``) has passed. Ctrl-C stops them too: Python runs the SIGINT handler when
    SQLite calls this, the KeyboardInterrupt aborts the statement ("interrupted"), and
    :func:`stopped_read` turns that back into a KeyboardInterrupt."""

    __slots__ = ("deadline", "seconds", "expired", "path")

    def __init__(self, seconds: float | None, path: Path) -> None:
        self.seconds, self.path = seconds, path
        self.deadline = None if not seconds else time.monotonic() + seconds
        self.expired = False

    def __call__(self) -> int:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.expired = True
            _EXPIRED[:] = [self]
            return 1
        return 0


_EXPIRED: list[Watch] = []


def stopped_read(error: BaseException) -> BaseException | None:
    """What a read that SQLite stopped ("interrupted") means: a StoreError saying which deadline
    passed, or a KeyboardInterrupt (Ctrl-C during the statement); None for any other error."""
    if not isinstance(error, sqlite3.OperationalError) or str(error) != "interrupted":
        return None
    if _EXPIRED:
        watch = _EXPIRED.pop()
        return StoreError(f"{watch.path}: a read of the store was stopped after {watch.seconds:g} s: no view or "
                          "query of a store dataidx made runs this long (a crafted store?)")
    return KeyboardInterrupt()


class FileConnection(sqlite3.Connection):
    """sqlite3's connection to a store file, with the read path's few extra words."""

    dialect = SQLITE
    path: Path
    #: A file a process opened stays the file it opened, so its fetches never see a new stamp.
    on_new_stamp: Callable[[], None] | None = None

    def fetch(self, sql: str, parameters: Sequence[Any], /) -> list[tuple[Any, ...]]:
        # A file stays readable after it is replaced: the stamp checked at open covers every read.
        try:
            return self.execute(sql, parameters).fetchall()
        except sqlite3.DatabaseError as exc:
            stopped = stopped_read(exc)
            if stopped is not None:
                raise stopped from None
            raise StoreError(f"{self.path}: cannot read store: {exc}") from None

    def stamp(self) -> int:
        return self.execute("PRAGMA user_version").fetchone()[0]

    def watch(self, seconds: float | None) -> None:
        """Stop this connection's statements ``seconds`` from now (None: only at Ctrl-C)."""
        self.set_progress_handler(Watch(seconds, self.path), WATCH_STEPS)

    def integrity(self) -> list[str]:
        self.watch(None)  # checking every page of a large file takes as long as the file is large
        found = [row[0] for row in self.execute("PRAGMA integrity_check")]
        return ([] if found == ["ok"] else found) + schema_problems(lambda sql: self.execute(sql).fetchall())

    def replaced_objects(self) -> list[str]:
        return replaced_objects(lambda sql: self.execute(sql).fetchall())

    def tune_for_fetches(self) -> None:
        self.watch(None)  # a reader's connection lives as long as training; its fetches are lookups
        self.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        self.execute(f"PRAGMA cache_size = -{CACHE_KIB}")


def check_store_file(path: Path) -> None:
    """A StoreError unless ``path`` is a SQLite file."""
    if not path.exists():
        raise StoreError(f"{path}: store not found")
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file")
    if not path.is_file():  # opening a FIFO waits for a writer forever
        raise StoreError(f"{path}: is not a regular file (a FIFO or a device?), not a store file")
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store: {exc.strerror or exc}") from None
    if header != SQLITE_HEADER:
        raise StoreError(f"{path}: not a dataidx store (not a SQLite file)")


def open_file(path: Path) -> tuple[FileConnection, list[str]]:
    """A read-only connection to the store file at ``path`` and the schema revisions it records
    (one; two say it was altered)."""
    check_store_file(path)
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                 factory=FileConnection)
    connection.path = path
    connection.watch(READ_SECONDS)
    try:
        rows = connection.execute(REVISIONS_READ).fetchall()
    except sqlite3.DatabaseError as exc:
        connection.close()
        stopped = stopped_read(exc)
        if stopped is not None:
            raise stopped from None
        if "no such table" in str(exc):
            raise StoreError(f"{path}: not a dataidx store (no schema version)") from None
        raise StoreError(f"{path}: cannot read store: {exc}") from None
    return connection, [row[0] for row in rows]

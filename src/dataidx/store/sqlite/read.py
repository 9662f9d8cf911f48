"""Reading a store file: sqlite3 alone, opened read-only, so opening one costs milliseconds.

Neither SQLAlchemy nor Alembic is imported here (together a third of a second): ``dataidx info``
and every DataLoader worker start from this module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import StoreError
from ..dialect import Dialect
from .objects import schema_problems

SQLITE = Dialect(mark="?", ids="SELECT value FROM json_each(?)", stamped="",
                 json_array="json_group_array({})")
SQLITE_HEADER = b"SQLite format 3\x00"
#: Pages come through a shared memory map; a small private cache keeps DataLoader workers lean.
MMAP_BYTES = 1 << 40
CACHE_KIB = 256


class FileConnection(sqlite3.Connection):
    """sqlite3's connection to a store file, with the read path's few extra words."""

    dialect = SQLITE
    path: Path
    #: A file a process opened stays the file it opened, so its fetches never see a new stamp.
    on_new_stamp = None

    def fetch(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        # A file stays readable after it is replaced: the stamp checked at open covers every read.
        try:
            return self.execute(sql, parameters).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read store: {exc}") from None

    def stamp(self) -> int:
        return self.execute("PRAGMA user_version").fetchone()[0]

    def integrity(self) -> list[str]:
        found = [row[0] for row in self.execute("PRAGMA integrity_check")]
        return ([] if found == ["ok"] else found) + schema_problems(lambda sql: self.execute(sql).fetchall())

    def tune_for_fetches(self) -> None:
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
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store: {exc.strerror or exc}") from None
    if header != SQLITE_HEADER:
        raise StoreError(f"{path}: not a dataidx store (not a SQLite file)")


def open_file(path: Path) -> tuple[FileConnection, str | None]:
    """A read-only connection to the store file at ``path`` and its schema revision."""
    check_store_file(path)
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                 factory=FileConnection)
    connection.path = path
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        connection.close()
        if "no such table" in str(exc):
            raise StoreError(f"{path}: not a dataidx store (no schema version)") from None
        raise StoreError(f"{path}: cannot read store: {exc}") from None
    return connection, (row[0] if row else None)

"""A spec's rows as a shard of a render keeps them: a small SQLite file per part, its rows in
``entry_renders``' columns and the summaries counted from them, written by the shard and
inserted by the merge through SQLite's own bulk path.

Why a SQLite file: the merge attaches it and copies its rows with one ``INSERT ... SELECT``
(about 3M rows/s, no Python object per row), where rows bound from Python insert at 1.2M
rows/s at best; and the shard counts the part's summaries (what ``render_statuses`` and
``render_blocks`` hold, and the lengths as ``length_chunks`` keeps them) with the SQL a serial
render's write runs, so the merge adds a few rows per part instead of counting every row again.
A merged spec then equals a serial render's row for row (tests compare them), and ``dataidx
verify`` recounts the summaries from the rows, as for any spec.

A part comes from shared storage, so the merge trusts nothing in it but its layout: the tables
must be exactly these (no view, trigger or index: no SQL of the file's runs), the insert keeps
only rows whose every value is one a render writes, and their number must be the part's range.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import StoreError
from ..dialect import STATUSES, TRAINING_STATUSES
from .causes import CauseTally, tally_causes
from .lengths import pack_lengths
from .rows import PartFile, StoredRow, split_plain
from .summaries import SUMMARY_INSERTS
from .tables import LENGTH_CHUNK_ENTRIES

if TYPE_CHECKING:
    from sqlalchemy import Connection

#: The part file's tables, as ``sqlite_schema`` spells them (the merge checks them to the letter).
PART_TABLES = {
    "rows": "CREATE TABLE rows (entry_id INTEGER PRIMARY KEY, tokens INTEGER NOT NULL, supervised_tokens INTEGER "
            "NOT NULL, full_tokens INTEGER NOT NULL, status TEXT NOT NULL, detail TEXT, cause TEXT, reasoning TEXT, "
            "token_offset INTEGER, side_tokens INTEGER, token_weights BLOB, extra_info TEXT)",
    # The store's summary tables' columns (spec 0): the serial write's SQL fills them as it is.
    "render_statuses": "CREATE TABLE render_statuses (spec_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL, status "
                       "TEXT NOT NULL, entries INTEGER NOT NULL, longest INTEGER NOT NULL)",
    "render_blocks": "CREATE TABLE render_blocks (spec_id INTEGER NOT NULL, block INTEGER NOT NULL, dataset_id INTEGER "
                     "NOT NULL, entries INTEGER NOT NULL, tokens INTEGER NOT NULL, supervised_tokens INTEGER NOT NULL)",
    "causes": "CREATE TABLE causes (kind TEXT NOT NULL, cause TEXT NOT NULL, entries INTEGER NOT NULL, "
              "first_entry INTEGER NOT NULL)",
    "uses": "CREATE TABLE uses (dataset_id INTEGER NOT NULL, token TEXT NOT NULL, entries INTEGER NOT NULL)",
    "lengths": "CREATE TABLE lengths (tokens BLOB NOT NULL, supervised_tokens BLOB NOT NULL)",
}
_COLUMNS = ("entry_id, tokens, supervised_tokens, full_tokens, status, detail, cause, reasoning, token_offset, "
            "side_tokens, token_weights, extra_info")
_PLAIN = ("INSERT INTO rows (entry_id, tokens, supervised_tokens, full_tokens, status, token_offset) "
          "VALUES (?, ?, ?, ?, ?, ?)")
_FULL = f"INSERT INTO rows ({_COLUMNS}) VALUES ({', '.join('?' * 12)})"
_TRAINS = ", ".join(f"'{status}'" for status in TRAINING_STATUSES)
# What a render writes, value by value: a row that holds anything else is not inserted (and so refused).
_VALID = " AND ".join([
    *(f"typeof({column}) = 'integer' AND {column} BETWEEN 0 AND 2147483647"
      for column in ("tokens", "supervised_tokens", "full_tokens")),
    f"status IN ({', '.join(repr(status) for status in STATUSES)})",
    *(f"({column} IS NULL OR typeof({column}) = 'text')" for column in ("detail", "cause", "reasoning", "extra_info")),
    "(token_offset IS NULL OR (typeof(token_offset) = 'integer' AND token_offset BETWEEN 0 AND :words))",
    "(side_tokens IS NULL OR (typeof(side_tokens) = 'integer' AND side_tokens BETWEEN 0 AND 2147483647))",
    "(token_weights IS NULL OR typeof(token_weights) = 'blob')",
])
_INSERT = (f"INSERT INTO entry_renders (spec_id, {_COLUMNS}) SELECT :spec, entry_id, tokens, supervised_tokens, "
           "full_tokens, status, detail, cause, reasoning, token_offset + :base, side_tokens, token_weights, "
           f"extra_info FROM part.rows WHERE entry_id BETWEEN :first AND :last AND {_VALID}")
_INVALID = (f"SELECT entry_id, entry_id BETWEEN :first AND :last FROM part.rows WHERE NOT ({_VALID}) "
            "OR entry_id NOT BETWEEN :first AND :last LIMIT 1")


class PartRowsWriter:
    """Writes one part's rows (a shard's), then its summaries, into a new SQLite file.

    Example::

        writer = PartRowsWriter(path)
        writer.add(rows, uses)           # each chunk a render pass returns, in entry order
        writer.finish(datasets)          # ``(id, first entry, entries)`` of the store's datasets
    """

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode = OFF")  # a new file: a failed part is rendered again whole
        self.connection.execute("PRAGMA synchronous = OFF")  # the shard syncs the file once, when complete
        self.connection.execute("BEGIN")
        for sql in PART_TABLES.values():
            self.connection.execute(sql)
        self.uses: Counter[tuple[int, str]] = Counter()
        self.causes: CauseTally = {}
        self.tokens: list[bytes] = []
        self.supervised: list[bytes] = []

    def close(self) -> None:
        self.connection.close()

    def add(self, rows: list[StoredRow], uses: Mapping[tuple[int, str], int]) -> None:
        """One chunk's rows (every base entry of a range, in id order) and its added-token uses."""
        plain, full = split_plain(rows)
        if plain:
            self.connection.executemany(_PLAIN, plain)
        if full:
            self.connection.executemany(_FULL, full)
        self.uses.update(uses)
        tally_causes(self.causes, rows)
        trains = np.array([row[4] in TRAINING_STATUSES for row in rows], dtype=bool)
        self.tokens.append(pack_lengths(np.array([row[1] for row in rows], dtype=np.int64), trains))
        self.supervised.append(pack_lengths(np.array([row[2] for row in rows], dtype=np.int64), trains))

    def finish(self, datasets: Iterable[tuple[int, int, int]]) -> None:
        """Count the part's summaries (with the serial write's SQL) and close the file."""
        execute = self.connection.execute
        execute("CREATE TEMP TABLE datasets (id INTEGER PRIMARY KEY, first_entry INTEGER, entries INTEGER)")
        self.connection.executemany("INSERT INTO temp.datasets VALUES (?, ?, ?)", list(datasets))
        execute("CREATE TEMP VIEW entry_renders AS SELECT 0 AS spec_id, * FROM main.rows")  # as spec 0's rows
        for sql in SUMMARY_INSERTS:
            execute(sql, (0,))
        self.connection.executemany("INSERT INTO causes VALUES (?, ?, ?, ?)",
                                    [(*key, *counted) for key, counted in sorted(self.causes.items())])
        self.connection.executemany("INSERT INTO uses VALUES (?, ?, ?)",
                                    [(dataset, token, n) for (dataset, token), n in sorted(self.uses.items())])
        execute("INSERT INTO lengths VALUES (?, ?)", (b"".join(self.tokens), b"".join(self.supervised)))
        execute("COMMIT")
        self.connection.close()


@dataclass
class PartRows:
    """The rows of a spec's parts, in entry order, and their summaries summed: what
    :func:`~.writes.save_render_spec` writes instead of rows kept by a serial render."""

    parts: list[PartFile]
    entries: int = 0
    training_entries: int = 0
    added_uses: Counter[tuple[int, str]] = field(default_factory=Counter)
    #: per ``(kind, cause)``: entries and the first one's id
    causes: CauseTally = field(default_factory=dict)
    statuses: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    blocks: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    lengths: dict[str, list[bytes]] = field(default_factory=lambda: {"tokens": [], "supervised_tokens": []})

    @classmethod
    def read(cls, parts: list[PartFile]) -> PartRows:
        """Each part's summaries, summed (the rows stay in the files until :meth:`insert`)."""
        found = cls(parts)
        for part in parts:
            with _opened(part.path) as connection:
                found._add(part, connection)
        return found

    def _add(self, part: PartFile, connection: sqlite3.Connection) -> None:
        entries = part.last - part.first + 1
        try:
            for dataset, status, n, longest in connection.execute(
                    "SELECT dataset_id, status, entries, longest FROM render_statuses"):
                now = self.statuses.setdefault((int(dataset), str(status)), [0, 0])
                now[0], now[1] = now[0] + int(n), max(now[1], int(longest))
                self.training_entries += int(n) if status in TRAINING_STATUSES else 0
            for block, dataset, *sums in connection.execute(
                    "SELECT block, dataset_id, entries, tokens, supervised_tokens FROM render_blocks"):
                now = self.blocks.setdefault((int(block), int(dataset)), [0, 0, 0])
                for at, value in enumerate(sums):
                    now[at] += int(value)
            for kind, cause, n, first in connection.execute("SELECT kind, cause, entries, first_entry FROM causes"):
                before, earliest = self.causes.get((str(kind), str(cause)), (0, int(first)))
                self.causes[str(kind), str(cause)] = (before + int(n), min(earliest, int(first)))
            for dataset, token, n in connection.execute("SELECT dataset_id, token, entries FROM uses"):
                self.added_uses[int(dataset), str(token)] += int(n)
        except (TypeError, ValueError):
            raise StoreError(f"{part.path}: its summaries hold a value that is not a count") from None
        arrays = connection.execute("SELECT tokens, supervised_tokens FROM lengths").fetchall()
        if len(arrays) != 1 or any(not isinstance(blob, bytes) or len(blob) != 4 * entries for blob in arrays[0]):
            raise StoreError(f"{part.path}: its lengths are not 4 bytes for each of its {entries:,} entries")
        self.lengths["tokens"].append(arrays[0][0])
        self.lengths["supervised_tokens"].append(arrays[0][1])
        self.entries += entries

    def insert(self, connection: Connection, spec_id: int) -> None:
        """Every part's rows into ``entry_renders`` under ``spec_id``, each attached in turn and
        copied in one statement; a part with any row a render would not write is refused."""
        driver: Any = connection.connection.driver_connection  # the working copy's sqlite3 connection
        for part in self.parts:
            driver.execute("ATTACH DATABASE ? AS part", (str(part.path),))
            try:
                _check_layout(driver, part.path, "part")
                values = {"spec": spec_id, "base": part.base, "words": part.words, "first": part.first,
                          "last": part.last}
                inserted = driver.execute(_INSERT, values).rowcount
                if inserted != part.last - part.first + 1:
                    raise StoreError(f"{part.path}: {_fault(driver.execute(_INVALID, values).fetchone(), part)}")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{part.path}: not a part's rows file ({exc})") from None
            finally:
                driver.commit()  # a working copy, published whole or not at all: DETACH needs no transaction
                driver.execute("DETACH DATABASE part")

    def chunks(self, size: int = 1 << 16) -> Iterator[list[StoredRow]]:
        """Every part's rows in entry order, their token offsets moved into the spec's token file
        (for tokens added to a spec whose rows are stored: compared with them, not inserted)."""
        for part in self.parts:
            values = {"words": part.words, "first": part.first, "last": part.last}
            found = 0
            with _opened(part.path) as connection:
                cursor = connection.execute(f"SELECT {_COLUMNS} FROM rows WHERE entry_id BETWEEN :first AND :last "
                                            f"AND {_VALID} ORDER BY entry_id", values)
                while rows := cursor.fetchmany(size):
                    found += len(rows)
                    yield [_rebased(row, part.base) for row in rows]
            if found != part.last - part.first + 1:
                raise StoreError(f"{part.path}: holds {found:,} valid rows of base entries {part.first}..{part.last}")

    def insert_summaries(self, connection: Connection, spec_id: int) -> None:
        """``render_statuses`` and ``render_blocks`` from the parts' counts, as a serial write counts them."""
        statuses = [(spec_id, dataset, status, n, longest) for (dataset, status), (n, longest)
                    in sorted(self.statuses.items())]
        blocks = [(spec_id, block, dataset, *sums) for (block, dataset), sums in sorted(self.blocks.items())]
        if statuses:
            connection.exec_driver_sql("INSERT INTO render_statuses (spec_id, dataset_id, status, entries, longest) "
                                       "VALUES (?, ?, ?, ?, ?)", statuses)
        if blocks:  # none when no entry trains
            connection.exec_driver_sql("INSERT INTO render_blocks (spec_id, block, dataset_id, entries, tokens, "
                                       "supervised_tokens) VALUES (?, ?, ?, ?, ?, ?)", blocks)

    def length_chunk_rows(self, spec_id: int, first_entry: int) -> Iterable[dict[str, object]]:
        """``length_chunks`` rows from the parts' arrays, chunked as a serial write chunks them."""
        arrays = {column: b"".join(blobs) for column, blobs in self.lengths.items()}
        step = LENGTH_CHUNK_ENTRIES * 4
        for start in range(0, len(arrays["tokens"]), step):
            yield {"spec_id": spec_id, "first_entry": first_entry + start // 4,
                   "entries": len(arrays["tokens"][start:start + step]) // 4,
                   **{column: blob[start:start + step] for column, blob in arrays.items()}}


class _opened:
    """A part file opened read-only, its layout checked: a context manager of its connection."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.connection = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            _check_layout(self.connection, self.path, "main")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a part's rows file ({exc})") from None
        return self.connection

    def __exit__(self, *exc_info: object) -> None:
        self.connection.close()


def _rebased(row: Any, base: int) -> StoredRow:
    """A part's row, its token offset moved to where the part's words start in the spec's file."""
    return (*row[:8], None if row[8] is None else row[8] + base, *row[9:])  # type: ignore[return-value]


def _fault(row: tuple[int, int] | None, part: PartFile) -> str:
    """What is wrong with a part whose rows are not its range's, each once, as a render writes them."""
    if row is None:
        return f"holds fewer rows than its base entries {part.first}..{part.last}"
    entry, inside = row
    return (f"base entry {entry}'s row holds a value no render writes" if inside else
            f"holds a row of base entry {entry}, outside its range {part.first}..{part.last}")


def _check_layout(connection: sqlite3.Connection, path: Path, schema: str) -> None:
    """The file holds exactly :data:`PART_TABLES`: nothing of its own that SQL would run."""
    found = dict(connection.execute(f"SELECT name, sql FROM {schema}.sqlite_schema").fetchall())
    if found != PART_TABLES:
        raise StoreError(f"{path}: not a part's rows file (its tables are not those a shard writes)")

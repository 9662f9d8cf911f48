"""Where a spec's stored tokens are recorded: ``spec_tokens`` (its token file) and the
``entry_renders`` columns that place each entry in it (see migration 0011)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Connection, bindparam, delete, insert, update

from .dialect import Reads
from .location import PostgresStore, store_location, tokens_folder
from .schema import EntryRender, SpecTokens
from .sqlite.files import CopyReads

#: Per entry with tokens: ``(entry id, token offset, side tokens, token weights)``.
EntryTokens = tuple[int, int, "int | None", "bytes | None"]

_TOKEN_FILE = ("SELECT file, folder, word_bytes, entries, tokens, bytes, sha256 FROM spec_tokens "
               "WHERE spec_id = {mark}")


@dataclass(frozen=True, kw_only=True)
class StoredTokenFile:
    """A spec's token file as the store recorded it."""

    file: str
    #: the folder it was written to; None: ``<store>.tokens`` beside the store file, wherever it is now
    folder: str | None
    word_bytes: int
    entries: int
    tokens: int
    bytes: int
    sha256: str

    def path(self, store: str | os.PathLike[str]) -> Path:
        """Where the file is for the store at ``store``."""
        return Path(self.folder) / self.file if self.folder else tokens_folder(store_location(store)) / self.file


def read_token_file(reads: Reads, spec_id: int) -> StoredTokenFile | None:
    """The token file of spec ``spec_id``, or None when its tokens are not stored."""
    found = reads.all(_TOKEN_FILE, spec_id)
    if not found:
        return None
    file, folder, word_bytes, entries, tokens, size, sha256 = found[0]
    return StoredTokenFile(file=file, folder=folder, word_bytes=word_bytes, entries=entries, tokens=tokens,
                           bytes=size, sha256=sha256)


def save_token_file(connection: Connection, spec_id: int, record: StoredTokenFile, *, seconds: float) -> None:
    """Record spec ``spec_id``'s token file, in place of any it had."""
    connection.execute(delete(SpecTokens).where(SpecTokens.spec_id == spec_id))
    connection.execute(insert(SpecTokens).values(
        spec_id=spec_id, file=record.file, folder=record.folder, word_bytes=record.word_bytes,
        entries=record.entries, tokens=record.tokens, bytes=record.bytes, sha256=record.sha256,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=seconds))


def place_entry_tokens(connection: Connection, spec_id: int, rows: Iterable[list[EntryTokens]]) -> None:
    """Set where each entry's words lie, for a spec whose lengths are already stored."""
    statement = (update(EntryRender)
                 .where(EntryRender.spec_id == bindparam("spec"), EntryRender.entry_id == bindparam("entry"))
                 .values(token_offset=bindparam("offset"), side_tokens=bindparam("side"),
                         token_weights=bindparam("weights")))
    for chunk in rows:
        if chunk:
            connection.execute(statement, [{"spec": spec_id, "entry": entry_id, "offset": offset, "side": side,
                                            "weights": weights} for entry_id, offset, side, weights in chunk])


_STORED_LENGTHS = ("SELECT entry_id, tokens, supervised_tokens, full_tokens, status FROM entry_renders "
                   "WHERE spec_id = {mark} AND entry_id BETWEEN {mark} AND {mark} ORDER BY entry_id")


def stored_lengths(connection: Connection, spec_id: int, first: int, last: int) -> list[tuple[int, int, int, int, str]]:
    """``(entry id, tokens, supervised, full, status)`` of entries ``first..last`` under a spec, on a
    writer's working copy: what adding tokens to a stored spec checks its rendering against."""
    return [(row[0], row[1], row[2], row[3], row[4])
            for row in CopyReads(connection).all(_STORED_LENGTHS, spec_id, first, last)]


def spec_id_of(connection: Connection, spec: str) -> int:
    """The id of spec ``spec`` on a writer's working copy (it exists: the writer checked)."""
    return CopyReads(connection).all("SELECT id FROM render_specs WHERE name = {mark}", spec)[0][0]


def own_token_files(connection: Connection, store: str | os.PathLike[str]) -> list[str]:
    """The token files the specs name in the store's own token folder, on a writer's working copy:
    what :func:`prune_token_files` keeps once the write is in place."""
    own = str(tokens_folder(store_location(store)))
    return [file for file, folder in CopyReads(connection).all("SELECT file, folder FROM spec_tokens")
            if folder is None or folder == own]


def default_token_folder(store: str | os.PathLike[str]) -> str | None:
    """What ``spec_tokens.folder`` records for a file in the store's own token folder: nothing for a
    store file (the folder goes where the file goes), the absolute folder for a store in
    PostgreSQL (the rendering machine's cache: a reader elsewhere is told where it was written)."""
    location = store_location(store)
    return str(tokens_folder(location)) if isinstance(location, PostgresStore) else None


def prune_token_files(store: str | os.PathLike[str], referenced: Iterable[str]) -> list[str]:
    """Remove the token files in the store's own token folder that no spec names any more (a spec
    rendered again another way, or removed): the names removed. A folder the user chose
    (``--tokens-dir``) may hold other stores' files, so only ``<store>.tokens`` (or the PostgreSQL
    store's cache folder) is pruned. A reader that mapped a removed file keeps reading it."""
    folder = tokens_folder(store_location(store))
    if not folder.is_dir():
        return []
    keep = set(referenced)
    removed = []
    for path in sorted(folder.glob("*.tokens")):
        if path.name not in keep:
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed

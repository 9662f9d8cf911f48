"""Where a spec's stored tokens are recorded: ``spec_tokens`` (its token file) and the
``entry_renders`` columns that place each entry in it (see migration 0011)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ...errors import StaleStoreError, StoreError
from ..connect import open_any_revision
from ..dialect import Reads
from ..location import PostgresStore, store_location, tokens_folder
from ..sqlite.working_copy import WorkingCopy

logger = logging.getLogger(__name__)

#: Per entry with tokens: ``(entry id, token offset, side tokens, token weights, extra info)``.
EntryTokens = tuple[int, int, "int | None", "bytes | None", "str | None"]

#: The first schema revision with stored tokens (``spec_tokens``).
TOKENS_SINCE = "0011"
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
        """Where the file is for the store at ``store``. A store is data, not a list of paths to
        open: a row whose file is not a plain name in its folder (``../x``, ``/x``), or whose folder
        is not the absolute one ``--tokens-dir`` records, is refused."""
        if not is_token_file_name(self.file) or (self.folder is not None and not os.path.isabs(self.folder)):
            where = f"folder {self.folder!r}" if self.folder is not None else "the store's token folder"
            raise StaleStoreError(f"{store}: a spec's token file is recorded as {self.file!r} in {where}: not a file "
                                  "name in its token folder (the store was edited); run dataidx render "
                                  "--store-tokens again")
        return Path(self.folder) / self.file if self.folder else tokens_folder(store_location(store)) / self.file


def is_token_file_name(name: str) -> bool:
    """Whether ``name`` is a name a token file may have: a visible ``*.tokens`` file in its folder,
    never a path (the hidden names are a writer's temporaries)."""
    return (name.endswith(".tokens") and not name.startswith(".") and os.path.basename(name) == name
            and "\0" not in name)


def read_token_file(reads: Reads, spec_id: int) -> StoredTokenFile | None:
    """The token file of spec ``spec_id``, or None when its tokens are not stored."""
    found = reads.all(_TOKEN_FILE, spec_id)
    if not found:
        return None
    file, folder, word_bytes, entries, tokens, size, sha256 = found[0]
    return StoredTokenFile(file=file, folder=folder, word_bytes=word_bytes, entries=entries, tokens=tokens,
                           bytes=size, sha256=sha256)


def save_token_file(copy: WorkingCopy, spec_id: int, record: StoredTokenFile, *, seconds: float) -> None:
    """Record spec ``spec_id``'s token file, in place of any it had."""
    copy.execute("DELETE FROM spec_tokens WHERE spec_id = {mark}", spec_id)
    copy.insert_row("spec_tokens", {
        "spec_id": spec_id, "file": record.file, "folder": record.folder, "word_bytes": record.word_bytes,
        "entries": record.entries, "tokens": record.tokens, "bytes": record.bytes, "sha256": record.sha256,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": seconds})


_PLACE = ("UPDATE entry_renders SET token_offset = {mark}, side_tokens = {mark}, token_weights = {mark}, "
          "extra_info = {mark} WHERE spec_id = {mark} AND entry_id = {mark}")


def place_entry_tokens(copy: WorkingCopy, spec_id: int, rows: Iterable[list[EntryTokens]]) -> None:
    """Set where each entry's words lie, for a spec whose lengths are already stored."""
    for chunk in rows:
        copy.insert_many(_PLACE, [(offset, side, weights, info, spec_id, entry_id)
                                  for entry_id, offset, side, weights, info in chunk])


_STORED_LENGTHS = ("SELECT entry_id, tokens, supervised_tokens, full_tokens, status FROM entry_renders "
                   "WHERE spec_id = {mark} AND entry_id BETWEEN {mark} AND {mark} ORDER BY entry_id")


def stored_lengths(reads: Reads, spec_id: int, first: int, last: int) -> list[tuple[int, int, int, int, str]]:
    """``(entry id, tokens, supervised, full, status)`` of entries ``first..last`` under a spec, on a
    writer's working copy: what adding tokens to a stored spec checks its rendering against."""
    return [(row[0], row[1], row[2], row[3], row[4])
            for row in reads.all(_STORED_LENGTHS, spec_id, first, last)]


def own_token_files(reads: Reads, store: str | os.PathLike[str], folder: str | None = None) -> set[str]:
    """The token files the specs name in ``folder`` (None: the store's own token folder), on a
    writer's working copy: what :func:`prune_token_files` compares before and after a write, and
    the names a writer may replace there (any other file of that name is not this store's)."""
    return _in_folder(reads.all("SELECT file, folder FROM spec_tokens"), store, folder)


def recorded_token_files(store: str | os.PathLike[str] | PostgresStore) -> set[str]:
    """The token files a store records in its own folder, read before a build replaces it (with
    none): what :func:`prune_token_files` removes once the new store is in place."""
    try:
        connection, revision = open_any_revision(store)
    except StoreError:
        return set()  # no store there
    try:
        rows = (connection.execute("SELECT file, folder FROM spec_tokens").fetchall()
                if revision is not None and revision >= TOKENS_SINCE else [])
    finally:
        connection.close()
    return _in_folder(rows, store, None)


def _in_folder(rows: Iterable[tuple[str, str | None]], store: str | os.PathLike[str] | PostgresStore,
               folder: str | None) -> set[str]:
    own = str(tokens_folder(store_location(store)))
    wanted = own if folder is None else folder
    return {file for file, at in rows if (own if at is None else at) == wanted}


def default_token_folder(store: str | os.PathLike[str]) -> str | None:
    """What ``spec_tokens.folder`` records for a file in the store's own token folder: nothing for a
    store file (the folder goes where the file goes), the absolute folder for a store in
    PostgreSQL (the rendering machine's cache: a reader elsewhere is told where it was written)."""
    location = store_location(store)
    return str(tokens_folder(location)) if isinstance(location, PostgresStore) else None


def prune_token_files(store: str | os.PathLike[str] | PostgresStore, named_before: Iterable[str],
                      named_after: Iterable[str] = ()) -> None:
    """Remove the token files of the store's own folder that a write has just stopped naming (a
    spec rendered again another way, or removed): ``named_before`` less ``named_after``, as
    :func:`own_token_files` read them in the write. Only what the store recorded is removed,
    never a file merely found there: ``<store>.tokens`` may be a link to a folder other stores
    share, and a folder the user chose (``--tokens-dir``) is never pruned at all. Only regular
    files are removed. Runs after the write is in place, so a file that cannot be removed is a
    warning, not a failed write; a reader that mapped a removed file keeps reading it."""
    folder = tokens_folder(store_location(store))
    for name in sorted(set(named_before) - set(named_after)):
        if not is_token_file_name(name):
            continue  # never a name a writer gives (a crafted row): nothing outside the folder is removed
        path = folder / name
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                logger.warning("%s: left in place, though no render spec names it now: not a regular file", path)
                continue
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("%s: left in place, though no render spec names it now: %s", path, exc.strerror or exc)

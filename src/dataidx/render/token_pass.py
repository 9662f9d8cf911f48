"""The parent's side of ``dataidx render --store-tokens``: each chunk's words appended to the spec's
token file as the chunk arrives, each entry placed in it, and the file published with the spec.

Chunks arrive in entry order, so the file holds entries in id order and a chunk's words never
stay in memory after it is written. Adding tokens to a spec already rendered (same fingerprint)
renders it again and checks every entry's lengths and status against the stored ones: the
lengths are not decided again, only the words are added.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StaleStoreError
from ..store import Specs, store_location
from .token_file import EXTRAS, TokenFileWriter, token_file_name
from .tokens import EntryWords, word_dtype

EXTRAS_BIT = int(EXTRAS)
#: What a render chunk's worker sends back of its tokens: its words, and per entry
#: ``(entry id, tokens, side tokens, weights, extra info)``.
ChunkTokens = tuple[np.ndarray, list[EntryWords]]


class WordPlacer:
    """Appends chunks' words to a token file's writer and says where each entry's lie: the
    spec's file in a render, a part's own file in a shard (:mod:`.parts`)."""

    def __init__(self, writer: TokenFileWriter) -> None:
        self.writer, self.dtype = writer, writer.dtype
        self.entries = 0
        self.first_entry: int | None = None
        self.next_entry = 0

    def place(self, tokens: ChunkTokens | None, entry_ids: list[int]) -> list[Specs.EntryTokens]:
        """Append one chunk's words and index the chunk's base entries ``entry_ids`` (every one, in
        id order; those that do not train take no words); ``(entry id, offset, side tokens,
        weights, extra info)`` of its entries that train. An entry with any of the last three is
        flagged in the index: a reader looks them up in the store."""
        words, entries = tokens if tokens is not None else (np.empty(0, dtype=self.dtype), [])
        offset = self.writer.append(words)
        stored = {entry_id: (count, side, weights, info) for entry_id, count, side, weights, info in entries}
        if self.first_entry is None and entry_ids:
            self.first_entry = self.next_entry = entry_ids[0]
        starts: list[int] = []
        placed = []
        for entry_id in entry_ids:
            starts += [offset] * (entry_id - self.next_entry)  # ids with no base entry: empty
            self.next_entry = entry_id + 1
            found = stored.get(entry_id)
            if found is None:
                starts.append(offset)
                continue
            count, side, weights, info = found
            flagged = side is not None or weights is not None or info is not None
            starts.append(offset | EXTRAS_BIT if flagged else offset)
            placed.append((entry_id, offset, side, weights, info))
            offset += count
        self.writer.index(np.array(starts, dtype=np.uint64))
        self.entries += len(placed)
        return placed


class TokenSink(WordPlacer):
    """Writes the chunks' words to a spec's token file, says where each entry's lie, and
    publishes the file with the spec.

    ``connection`` below is the writer's transaction (``dataidx.store.rewriting``): SQLAlchemy
    is the store's, so this stage passes it on untyped."""

    def __init__(self, store: str | os.PathLike[str], fingerprint: str, vocabulary: int,
                 folder: str | os.PathLike[str] | None = None) -> None:
        self.store = store
        #: what the store records (see Specs.default_token_folder): a store file's folder goes where it goes
        self.recorded_folder = str(Path(folder).resolve()) if folder is not None else Specs.default_token_folder(store)
        where = Path(self.recorded_folder) if self.recorded_folder else Specs.tokens_folder(store_location(store))
        super().__init__(TokenFileWriter(where, fingerprint, word_dtype(vocabulary)))
        self.started = time.perf_counter()

    def __enter__(self) -> TokenSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.writer.__exit__(*exc_info)

    def publish(self, connection: Any, spec_id: int) -> Specs.StoredTokenFile:
        """Publish the file and record it for spec ``spec_id`` (in the write that stores the spec).

        It takes its fingerprint's name unless a file of that name is there that this store does
        not record: another store's, rendered the same way into a folder both use (a shared
        ``--tokens-dir``, ``<store>.tokens`` linked to one), which is never replaced."""
        name = token_file_name(self.writer.fingerprint)
        if (os.path.lexists(self.writer.folder / name)
                and name not in Specs(connection).own_token_files(self.store, self.recorded_folder)):
            name = token_file_name(f"{self.writer.fingerprint}-{secrets.token_hex(4)}")
        self.writer.publish(self.first_entry or 0, name)
        record = Specs.StoredTokenFile(file=name, folder=self.recorded_folder,
                                 word_bytes=self.dtype.itemsize, entries=self.entries, tokens=self.writer.words,
                                 bytes=self.writer.bytes, sha256=self.writer.digest.hexdigest())
        Specs(connection).save_token_file(spec_id, record, seconds=time.perf_counter() - self.started)
        return record


def add_tokens(connection: Any, sink: TokenSink, spec: str, chunks: Iterator[list[Specs.StoredRow]]
               ) -> Specs.StoredTokenFile:
    """Place the tokens of spec ``spec``, already stored, checking each chunk's lengths against it."""
    specs = Specs(connection)
    spec_id = specs.get(spec)["id"]

    def checked() -> Iterator[list[Specs.EntryTokens]]:
        for rows in chunks:
            if not rows:
                continue
            stored = specs.stored_lengths(spec_id, rows[0][0], rows[-1][0])
            fresh = [row[:5] for row in rows]
            if stored != fresh:
                entry = next((a[0] for a, b in zip(fresh, stored) if a != b), rows[0][0])
                raise StaleStoreError(f"spec '{spec}': base entry {entry} renders otherwise than its stored "
                                      "lengths say (its data changed); run dataidx render again")
            yield [(row[0], row[8], row[9], row[10], row[11]) for row in rows if row[8] is not None]

    specs.place_entry_tokens(spec_id, checked())
    return sink.publish(connection, spec_id)

"""Rendered rows kept in a temporary file until they are written: a render of any size holds one
chunk in memory, and takes the store's writer lock only to write."""

from __future__ import annotations

import pickle
import tempfile
from collections import Counter
from collections.abc import Iterator

from ..store import Specs
from .rendered import TRAINING_STATUSES

#: Entries whose data text holds a plain (not special) added token, per ``(dataset id, token)``.
AddedUses = Counter[tuple[int, str]]


class RenderedRows:
    """Rendered rows kept in a temporary file, a chunk at a time, until they are written."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()
        self.entries = self.training_entries = 0
        self.added_uses: AddedUses = Counter()
        self.causes: Specs.CauseTally = {}  # (kind, cause) -> (entries, first entry id)

    def __enter__(self) -> RenderedRows:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.file.close()

    def add(self, rows: list[Specs.LengthRow], placed: list[Specs.EntryTokens] | None = None) -> None:
        """Keep one chunk's rows, with where each training entry's words lie when tokens are stored."""
        pickle.dump(stored_rows(rows, placed), self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.entries += len(rows)
        self.training_entries += sum(1 for row in rows if row[4] in TRAINING_STATUSES)
        Specs.tally_causes(self.causes, rows)

    def chunks(self) -> Iterator[list[Specs.StoredRow]]:
        self.file.seek(0)
        while True:
            try:
                yield pickle.load(self.file)
            except EOFError:
                return




def stored_rows(rows: list[Specs.LengthRow], placed: list[Specs.EntryTokens] | None) -> list[Specs.StoredRow]:
    """A chunk's rows as the store keeps them: each with where its words lie when tokens are stored."""
    where: dict[int, tuple[int | None, int | None, bytes | None, str | None]] = {
        entry_id: (offset, side, weights, info) for entry_id, offset, side, weights, info in placed or ()}
    if placed is not None:
        missing = [row[0] for row in rows if row[4] in TRAINING_STATUSES and row[0] not in where]
        assert not missing, f"entries {missing[:5]} train but their tokens were not stored"
    none: tuple[int | None, int | None, bytes | None, str | None] = (None, None, None, None)
    return [row + where.get(row[0], none) for row in rows]

"""What near-duplicate detection compares a row as: its words (the default), or the token ids a
render spec stored for it (``dataidx dedup --spec``). Either is a 64-bit hash per unit, in
order, for the whole row and for its supervised part; :mod:`.duplicates` makes their 5-grams.

Tokens are what training sees: a spec's template and tokenizer decide them, so two rows that
render alike are compared alike, in any language or script. A row's tokens are those of its
last entry that has any (a conversation's last cut holds every turn before it; an entry too
long for the spec has none), the supervised ones those with the supervised bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ..read import EntryReader
from ..render import START, TokenFile
from .rows import Row, row_texts
from .shingles import mix, word_hashes


class Units(Protocol):
    """A row as units: per row, their hashes (None: nothing to compare)."""

    name: str

    def of(self, reader: EntryReader, rows: Sequence[Row], *, supervised: bool) -> list[np.ndarray | None]: ...


class Words:
    """Rows as words: runs of letters, digits and ``_``, lowercased (:func:`.shingles.word_hashes`)."""

    name = "words (\\w runs, lowercased)"

    def of(self, reader: EntryReader, rows: Sequence[Row], *, supervised: bool) -> list[np.ndarray | None]:
        texts = row_texts(reader, list(rows))
        kept = [index for index, text in enumerate(texts) if text is not None]
        hashes, offsets = word_hashes([(texts[index].supervised if supervised else texts[index].whole)  # type: ignore[union-attr]
                                       for index in kept])
        found: list[np.ndarray | None] = [None] * len(rows)
        for at, index in enumerate(kept):
            found[index] = hashes[offsets[at]:offsets[at + 1]]
        return found


class Tokens:
    """Rows as the token ids a render spec stored (``--spec``), each id's hash."""

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens
        self.name = f"token ids of spec '{tokens.spec}'"

    def of(self, reader: EntryReader, rows: Sequence[Row], *, supervised: bool) -> list[np.ndarray | None]:
        _, words, index = self.tokens.mapped()
        top = words.dtype.itemsize * 8 - 1
        first, entries, mask = self.tokens.first_entry, self.tokens.entries, int(START)  # bit 63 flags extras
        found: list[np.ndarray | None] = []
        for row in rows:
            ids = None
            for entry in range(row.first + row.entries - 1, row.first - 1, -1):
                at = entry - first
                if not 0 <= at < entries:
                    continue
                start, end = int(index[at]) & mask, int(index[at + 1]) & mask
                if start == end:
                    continue  # an entry that does not train has no words
                if not start < end <= words.size:
                    raise self.tokens.damaged(entry, start, end)
                ids = np.asarray(words[start:end])
                break
            if ids is not None and supervised:
                ids = ids[(ids >> top).astype(bool)]
            found.append(None if ids is None else mix((ids & ((1 << top) - 1)).astype(np.uint64) + np.uint64(1)))
        return found

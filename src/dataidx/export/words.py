"""Stored words -> ids, supervision and loss weights as flat arrays, a bounded number of tokens at
a time: what every token format writes.

One gather from the mapped token file per chunk and a few NumPy operations over it; the only
per-entry Python is for entries whose weights are not the usual 1/0 (stored as runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import StaleStoreError, StoreError, UsageError
from ..render import IGNORE, TokenFile, unrun
from .placements import Placements

#: Tokens decoded (and then written) at a time: tens of MiB of arrays.
TOKENS_PER_CHUNK = 1 << 22


@dataclass(frozen=True)
class Words:
    """Consecutive documents' tokens, flat, with where their sequences and documents end."""

    #: the index (training entry or pack) of the first document
    first: int
    #: token ids, in the words' width (uint16 or uint32)
    ids: np.ndarray
    supervised: np.ndarray
    #: loss weights as float32 (what training casts them to)
    weights: np.ndarray
    #: tokens per sequence, and sequences per document
    lengths: np.ndarray
    documents: np.ndarray
    #: the first document here whose weights are not 1 where supervised and 0 elsewhere, if any
    weighted: int | None
    #: per sequence, its ``extra_info`` (None where it has none); None when no sequence here has one
    extra_info: list[str | None] | None = None

    def labels(self) -> np.ndarray:
        """Hugging Face labels: the id where supervised, -100 elsewhere (int32)."""
        return np.where(self.supervised, self.ids.astype(np.int32), np.int32(IGNORE))

    def document_lengths(self) -> np.ndarray:
        """Tokens per document."""
        return np.add.reduceat(self.lengths, _starts(self.documents)) if len(self.lengths) else self.lengths


def _starts(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive groups of ``counts`` items starts."""
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


def decoded(tokens: TokenFile, chunk: Placements, what: str,
            budget: int = TOKENS_PER_CHUNK) -> Iterator[Words]:
    """``chunk``'s documents decoded, about ``budget`` tokens at a time (a longer document alone).
    A preference pair is refused: token formats hold one sequence per entry."""
    if chunk.pairs.any():
        sequence = int(np.flatnonzero(chunk.pairs)[0])
        document = chunk.first + int(np.searchsorted(np.cumsum(chunk.documents), sequence, side="right"))
        raise UsageError(f"{what}: {'pack' if len(chunk.documents) < len(chunk.tokens) else 'training entry'} "
                         f"{document} is a preference pair; token formats hold SFT sequences only: export a spec or "
                         "mixture without pair datasets (or the samples, to .jsonl)")
    first_sequence = _starts(chunk.documents)
    per_document = np.add.reduceat(chunk.tokens, first_sequence) if len(chunk.tokens) else chunk.tokens
    ends = np.cumsum(per_document)
    cuts = np.unique(np.searchsorted(ends, np.arange(budget, int(ends[-1]) if len(ends) else 0, budget),
                                     side="right"))
    for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(chunk.documents)]):
        if stop > start:
            yield _decode(tokens, chunk, start, stop, first_sequence)


def _decode(tokens: TokenFile, chunk: Placements, start: int, stop: int, first_sequence: np.ndarray) -> Words:
    """Documents ``start..stop-1`` of ``chunk``, read from the mapped words in one gather."""
    low = int(first_sequence[start])
    high = int(first_sequence[stop]) if stop < len(first_sequence) else len(chunk.tokens)
    lengths, offsets = chunk.tokens[low:high], chunk.offsets[low:high]
    within = _starts(lengths)
    if len(lengths) and int((offsets + lengths).max()) > tokens.words:  # one check per chunk, not per word
        k = int(np.argmax(offsets + lengths > tokens.words))
        raise StaleStoreError(f"{tokens.path}: token file damaged: the store places an entry at words "
                              f"{offsets[k]}..{offsets[k] + lengths[k]} of {tokens.words} (spec '{tokens.spec}'); run "
                              "dataidx render --store-tokens again")
    words = np.asarray(tokens.words_array[np.repeat(offsets - within, lengths) + np.arange(int(lengths.sum()))])
    top = words.dtype.itemsize * 8 - 1
    supervised = (words >> top).astype(bool)
    ids = words & words.dtype.type((1 << top) - 1)
    weights = supervised.astype(np.float32)
    weighted = None
    for sequence in sorted(number for number in chunk.weights if low <= number < high):
        values = unrun(chunk.weights[sequence])
        at, count = int(within[sequence - low]), int(lengths[sequence - low])
        if len(values) != count:
            raise StoreError(f"stored loss weights cover {len(values)} tokens of an entry of {count} (spec "
                             f"'{tokens.spec}'); the store is damaged: run dataidx render --store-tokens again")
        weights[at:at + count] = values
        if weighted is None:
            document = int(np.searchsorted(np.cumsum(chunk.documents), sequence, side="right"))
            weighted = chunk.first + document
    extra_info = [chunk.extra_info.get(number) for number in range(low, high)] if chunk.extra_info else None
    return Words(chunk.first + start, ids, supervised, weights, lengths, chunk.documents[start:stop], weighted,
                 extra_info)

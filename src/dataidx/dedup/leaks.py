"""Benchmark leaks: which rows hold an eval item, and how much of it.

An eval set's items become word n-grams (8 words by default; :mod:`.shingles`), indexed as one
sorted array. A row's n-grams are looked up in it, in NumPy, a batch of rows at a time; a match is
``(row position, item, item position)``, and consecutive matches on one diagonal (the row and the
item advancing together) are a run of shared words. An item's score in a row is its longest run,
in words, over the item's words: the ConTAM measure (arXiv 2411.03923), which counts a span that
is really there, not scattered n-grams. An n-gram found in ``COMMON_ITEMS`` or more items of a
set is a template ("Which of the following is correct"), not a leak, and is left out of the index.
Items shorter than n words are not looked for (counted with the run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .shingles import ngram_hashes, word_hashes

#: An n-gram in this many items of a set or more is the set's template, not a leak.
COMMON_ITEMS = 3
#: Bits of the filter a row's n-grams pass before the index is searched: 2**24 bits (2 MB)
#: answer most n-grams "not in the set" at once (a sorted search per n-gram cost 45 us an entry).
_FILTER_BITS = 24


@dataclass(frozen=True)
class Match:
    """A row's best item of a set: its index, score, and the span of its words found."""

    row: int
    item: int
    score: float
    span: str


class EvalIndex:
    """An eval set's items as one sorted array of n-gram hashes, each with its item and position."""

    def __init__(self, items: list[str], n: int) -> None:
        self.n = n
        self.words = [text.split() for text in _normalized(items)]
        hashes, offsets = ngram_hashes(*word_hashes(items), n)
        counts = np.diff(offsets)
        lengths = np.array([len(words) for words in self.words], dtype=np.int64)
        self.short = int(((lengths > 0) & (lengths < n)).sum())
        item = np.repeat(np.arange(len(items)), counts)
        position = np.arange(len(hashes)) - np.repeat(offsets[:-1], counts)
        keep = np.repeat(lengths >= n, counts)
        hashes, item, position = hashes[keep], item[keep], position[keep]
        order = np.argsort(hashes, kind="stable")
        hashes, item, position = hashes[order], item[order], position[order]
        distinct_items = _items_per_hash(hashes, item)
        common = distinct_items >= COMMON_ITEMS
        self.hashes, self.item, self.position = hashes[~common], item[~common], position[~common]
        self.lengths = lengths
        self.common = int(len(np.unique(hashes[common])))
        self.filter = np.zeros(1 << _FILTER_BITS, dtype=bool)
        self.filter[(self.hashes >> np.uint64(64 - _FILTER_BITS)).astype(np.int64)] = True

    def best(self, texts: list[str], threshold: float) -> list[Match]:
        """Per text (a row), its best item at ``threshold`` or above, if any."""
        hashes, offsets = ngram_hashes(*word_hashes(texts), self.n)
        if not len(hashes) or not len(self.hashes):
            return []
        row = np.repeat(np.arange(len(texts)), np.diff(offsets))
        at = np.arange(len(hashes)) - np.repeat(offsets[:-1], np.diff(offsets))
        maybe = self.filter[(hashes >> np.uint64(64 - _FILTER_BITS)).astype(np.int64)]
        hashes, row, at = hashes[maybe], row[maybe], at[maybe]
        low = np.searchsorted(self.hashes, hashes, side="left")
        high = np.searchsorted(self.hashes, hashes, side="right")
        found = high > low
        if not found.any():
            return []
        low, width, row, at = low[found], (high - low)[found], row[found], at[found]
        index = np.repeat(low, width) + (np.arange(width.sum()) - np.repeat(np.cumsum(width) - width, width))
        row, at = np.repeat(row, width), np.repeat(at, width)
        item, position = self.item[index], self.position[index]
        diagonal = position - at
        order = np.lexsort((at, diagonal, item, row))
        row, at, item, diagonal, position = row[order], at[order], item[order], diagonal[order], position[order]
        begins = np.ones(len(row), dtype=bool)
        begins[1:] = (row[1:] != row[:-1]) | (item[1:] != item[:-1]) | (diagonal[1:] != diagonal[:-1]) | (
            at[1:] != at[:-1] + 1)
        run = np.cumsum(begins) - 1
        runs = np.bincount(run)
        starts = np.flatnonzero(begins)
        words = runs + self.n - 1
        score = words / self.lengths[item[starts]]
        matches: dict[int, Match] = {}
        for k in np.flatnonzero(score >= threshold).tolist():
            one, which = int(row[starts[k]]), int(item[starts[k]])
            if one in matches and matches[one].score >= score[k]:
                continue
            first = int(position[starts[k]])
            span = " ".join(self.words[which][first:first + int(words[k])])
            matches[one] = Match(one, which, round(float(min(score[k], 1.0)), 6), span)
        return [matches[one] for one in sorted(matches)]


def _items_per_hash(hashes: np.ndarray, item: np.ndarray) -> np.ndarray:
    """For each n-gram (sorted by hash), how many distinct items hold its hash."""
    if not len(hashes):
        return np.zeros(0, dtype=np.int64)
    pairs = np.unique(np.stack((hashes, item.astype(np.uint64)), axis=1), axis=0)
    distinct, per = np.unique(pairs[:, 0], return_counts=True)
    return per[np.searchsorted(distinct, hashes)]


def _normalized(texts: list[str]) -> list[str]:
    """Texts as the words :func:`.shingles.word_hashes` sees, lowercased, one space apart."""
    return [" ".join(re.findall(r"\w+", text.lower())) for text in texts]

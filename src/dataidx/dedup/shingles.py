"""Texts as word n-gram hashes, in NumPy: what near-duplicate detection and decontamination
compare. A word is a run of letters, digits or ``_`` (Python's ``\\w``), lowercased; punctuation
and whitespace only separate words. Texts are hashed as one array of bytes, with no Python object
per word: 5.6 us an entry of 190 words, where a regex and a hash per word took 50 (measured for
issue 55). Hashes are 64-bit and the same in every process and run (no salt)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_NOT_WORD = re.compile(r"\W+")
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_MIX1, _MIX2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
#: Odd, so invertible modulo 2**64: a word's hash is a difference of prefix sums, scaled back.
_BASE = np.uint64(0x100000001B3)
_BASE_INVERSE = np.uint64(pow(int(_BASE), -1, 1 << 64))
#: The n-gram hash's step (the golden ratio's 64 bits).
_STEP = np.uint64(0x9E3779B97F4A7C15)


def _folding() -> np.ndarray:
    """Each byte as a word byte (lowercased) or 0 (a separator); bytes past ASCII are word bytes:
    a text with any is folded by the regex first (:func:`_folded`)."""
    table = np.zeros(256, dtype=np.uint8)
    for byte in range(128):
        char = chr(byte)
        if char.isalnum() or char == "_":
            table[byte] = ord(char.lower())
    table[128:] = np.arange(128, 256, dtype=np.uint8)
    return table


_FOLD = _folding()


class _Powers:
    """``B**i`` and ``B**-i`` modulo 2**64 for every byte position, made once and grown by
    doubling (a cumulative product per batch cost as much as the hashing); kept up to
    ``KEPT`` positions (256 MB), made for the one text and let go past that (a 10M-character row)."""

    KEPT = 1 << 24
    powers = inverse = np.zeros(0, dtype=np.uint64)

    @classmethod
    def upto(cls, size: int) -> tuple[np.ndarray, np.ndarray]:
        if size > cls.KEPT:
            with np.errstate(over="ignore"):
                return (np.cumprod(np.full(size, _BASE, dtype=np.uint64)) * _BASE_INVERSE,
                        np.cumprod(np.full(size, _BASE_INVERSE, dtype=np.uint64)) * _BASE)
        if len(cls.powers) < size:
            grown = min(max(size, 2 * len(cls.powers), 1 << 16), cls.KEPT)
            with np.errstate(over="ignore"):
                cls.powers = np.cumprod(np.full(grown, _BASE, dtype=np.uint64)) * _BASE_INVERSE  # B**0, B**1, ...
                cls.inverse = np.cumprod(np.full(grown, _BASE_INVERSE, dtype=np.uint64)) * _BASE
        return cls.powers[:size], cls.inverse[:size]


def mix(values: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (murmur3's fmix64): nearby inputs give unrelated outputs."""
    with np.errstate(over="ignore"):
        values = values ^ (values >> np.uint64(33))
        values = values * _MIX1
        values = values ^ (values >> np.uint64(33))
        values = values * _MIX2
        return values ^ (values >> np.uint64(33))


def _folded(text: str) -> str:
    """A text with non-ASCII characters as its words lowercased, one space apart (\\w is Unicode)."""
    return text if text.isascii() else " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def word_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every word of every text as a 64-bit hash: ``(hashes, offsets)``, text ``i``'s words
    ``hashes[offsets[i]:offsets[i + 1]]``."""
    folded = [_folded(text) for text in texts]
    data = np.frombuffer("\x00".join(folded).encode(), dtype=np.uint8)
    lengths = np.fromiter((len(text) for text in folded), dtype=np.int64, count=len(folded))  # ASCII after folding
    starts = np.zeros(len(folded) + 1, dtype=np.int64)
    np.cumsum(lengths + 1, out=starts[1:])
    codes = _FOLD[data]
    inside = np.concatenate(([0], (codes != 0).view(np.int8), [0]))
    edges = np.diff(inside)
    begins, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    powers, inverse = _Powers.upto(len(codes))
    with np.errstate(over="ignore"):
        prefix = np.zeros(len(codes) + 1, dtype=np.uint64)
        np.cumsum(codes.astype(np.uint64) * powers, out=prefix[1:])
        hashes = mix((prefix[ends] - prefix[begins]) * inverse[begins] + (ends - begins).astype(np.uint64))
    offsets = np.searchsorted(begins, starts).astype(np.int64)
    return hashes, offsets


def ngram_hashes(words: np.ndarray, offsets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every run of ``n`` consecutive words within a text as one 64-bit hash: ``(hashes,
    offsets)`` as :func:`word_hashes` gives them. A text of fewer than ``n`` words (but one) is
    one n-gram of all its words; an empty text has none."""
    counts = np.diff(offsets)
    runs = np.maximum(counts - n + 1, 0)
    runs[(counts > 0) & (counts < n)] = 1
    out_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(runs, out=out_offsets[1:])
    starts = np.repeat(offsets[:-1], runs) + (np.arange(out_offsets[-1]) - np.repeat(out_offsets[:-1], runs))
    lengths = np.minimum(np.repeat(counts, runs), n)
    padded = np.concatenate((words, np.zeros(n, dtype=np.uint64)))
    with np.errstate(over="ignore"):
        hashes = np.full(len(starts), np.uint64(n))
        for k in range(n):
            hashes = np.where(k < lengths, hashes * _STEP + padded[starts + k], hashes)
    return mix(hashes), out_offsets

"""Near duplicates among rows: MinHash signatures of their word 5-grams (rensa's ``RMinHash``),
LSH bands that make candidate pairs, and every candidate verified by the exact Jaccard of the two
rows' 5-gram sets before anything is recorded.

The bands are 16 of 7 rows (112 permutations): a pair at Jaccard 0.8 becomes a candidate with
probability 0.977, at 0.5 with 0.118 (datatrove's 14 x 8 gives 0.924 and 0.053). Candidates are
only candidates: a pair is a duplicate when its exact Jaccard over the whole rows is at least
the threshold and their supervised texts share half their 5-grams or more, so the same prompt
with another answer is not one (:mod:`.duplicates`). Clusters join verified pairs; a cluster's
representative is its first row (the YAML's dataset order, then row order), and a member is
flagged only if its own Jaccard with the representative verifies too (a chain A~B~C does not
flag C against A below the threshold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .shingles import mix

#: MinHash permutations, LSH bands and rows per band: see the module's docstring.
PERMUTATIONS, BANDS, BAND_ROWS = 112, 16, 7
#: rensa's seed for the permutations: recorded with every run (signatures are not stored).
SEED = 1


def minhash_signatures(hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each text's MinHash signature over its n-gram ``hashes`` (texts as ``offsets`` cut them,
    each with one at least): ``(texts, PERMUTATIONS)`` of uint32."""
    # The MinHash library (Rust), loaded by a dedup only; it ships no type stubs.
    from rensa import RMinHash  # pyright: ignore[reportAttributeAccessIssue]

    matrix = RMinHash.digest_matrix_from_flat_token_hashes(hashes, offsets.astype(np.uint64), PERMUTATIONS, SEED)
    return np.asarray(matrix.to_rows(), dtype=np.uint32).reshape(len(offsets) - 1, PERMUTATIONS)


def band_keys(signatures: np.ndarray) -> np.ndarray:
    """Each text's key in each band: ``(texts, BANDS)`` of uint64, equal where the band's rows are."""
    keys = np.zeros((len(signatures), BANDS), dtype=np.uint64)
    values = signatures[:, :BANDS * BAND_ROWS].astype(np.uint64).reshape(len(signatures), BANDS, BAND_ROWS)
    with np.errstate(over="ignore"):
        for row in range(BAND_ROWS):
            keys = mix(keys * np.uint64(0x9E3779B97F4A7C15) + values[:, :, row])
    return keys


def candidate_pairs(keys: np.ndarray) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of texts that share a key in some band: in each bucket, its
    first text with each other one (a star: a cluster joins through its first member)."""
    found = []
    for band in range(keys.shape[1]):
        order = np.argsort(keys[:, band], kind="stable")
        ordered = keys[order, band]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        sizes = np.diff(np.append(starts, len(ordered)))
        shared = np.repeat(sizes > 1, sizes)
        heads = np.repeat(order[starts], sizes)
        pairs = np.stack((heads, order), axis=1)[shared & (heads != order)]
        found.append(pairs)
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(found)
    pairs.sort(axis=1)
    return np.unique(pairs, axis=0)


def jaccard(one: np.ndarray, other: np.ndarray) -> float:
    """The exact Jaccard of two sorted arrays of distinct hashes (0 for two empty ones)."""
    if not len(one) and not len(other):
        return 0.0
    shared = len(np.intersect1d(one, other, assume_unique=True))
    return shared / (len(one) + len(other) - shared)


@dataclass(frozen=True)
class Flagged:
    """A row flagged as a duplicate: its index, its representative's, and their verified Jaccard."""

    row: int
    representative: int
    jaccard: float


def clusters(pairs: np.ndarray, similar: Callable[[int, int], float | None]) -> list[Flagged]:
    """Rows flagged among candidate ``pairs``: ``similar(i, j)`` is the pair's verified Jaccard,
    or None below the threshold. Verified pairs join clusters; each cluster's first row is its
    representative, and a member is flagged when its own pair with the representative verifies."""
    parent: dict[int, int] = {}

    def root(row: int) -> int:
        while parent.get(row, row) != row:
            parent[row] = parent.get(parent[row], parent[row])
            row = parent[row]
        return row

    verified: dict[tuple[int, int], float] = {}
    for one, other in pairs.tolist():
        found = similar(one, other)
        if found is None:
            continue
        verified[one, other] = found
        a, b = root(one), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for row in {row for pair in verified for row in pair}:
        members.setdefault(root(row), []).append(row)
    flagged = []
    for representative, rows in members.items():
        for row in sorted(rows):
            if row == representative:
                continue
            found = verified.get((representative, row))
            found = similar(representative, row) if found is None else found
            if found is not None:
                flagged.append(Flagged(row, representative, found))
    return sorted(flagged, key=lambda one: one.row)

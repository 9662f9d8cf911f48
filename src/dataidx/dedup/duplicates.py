"""``dataidx dedup``: near-duplicate rows of a store found, verified and stored as a named list.

One pass over every row (forked processes) makes each row's band keys from its word 5-grams
(:mod:`.near`); the candidate pairs they give are verified in this process by reading both rows
again and computing their exact Jaccard, over the whole rows and over their supervised text; the
verified pairs make clusters, and every entry of each flagged row is stored with its
representative and their Jaccard (:class:`~dataidx.store.Evidence`). Nothing is deleted: the
list leaves its entries out only of mixtures drawn with ``--exclude``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version

import numpy as np

from ..errors import UsageError
from ..progress import CountProgress
from ..read import EntryReader
from ..render import open_tokens, read_spec
from ..store import Datasets, Evidence, rewriting
from .near import (
    BAND_ROWS,
    BANDS,
    PERMUTATIONS,
    SEED,
    band_keys,
    candidate_pairs,
    clusters,
    jaccard,
    minhash_signatures,
)
from .rows import Row, RowPass
from .shingles import ngram_hashes
from .units import Tokens, Units, Words

#: Words per n-gram compared.
NGRAM = 5
#: Rows whose 5-gram sets are made at once for verification.
_ROWS_PER_BATCH = 1024
#: The least Jaccard of two duplicates' supervised texts: answers that share less than half
#: their 5-grams are other answers, whatever the prompts share (the same prompt with another
#: answer is data, not a duplicate). Near copies at 0.8 over the whole rows share more.
ANSWER_JACCARD = 0.5


@dataclass
class _Keys:
    """A range's rows with something to compare, and their band keys."""

    rows: list[Row]
    keys: np.ndarray


def _flat(units: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows' unit hashes as one array and each row's offsets."""
    offsets = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum([len(one) for one in units], out=offsets[1:])
    return (np.concatenate(units) if units else np.zeros(0, np.uint64)), offsets


def _band_keys(units: Units, reader: EntryReader, rows: list[Row]) -> _Keys:
    found = units.of(reader, rows, supervised=False)
    kept = [(row, one) for row, one in zip(rows, found) if one is not None]
    hashes, offsets = ngram_hashes(*_flat([one for _, one in kept]), NGRAM)
    some = np.diff(offsets) > 0  # a row without units has no n-grams: nothing to compare
    if not some.any():
        return _Keys([], np.zeros((0, BANDS), dtype=np.uint64))
    # Its n-grams take no place in ``hashes``: leaving its offset out leaves the others' rows as they are.
    offsets = np.append(offsets[:-1][some], offsets[-1])
    return _Keys([row for (row, _), has in zip(kept, some) if has], band_keys(minhash_signatures(hashes, offsets)))


def _ngram_sets(units: list[np.ndarray | None]) -> list[np.ndarray]:
    """Each row's distinct 5-gram hashes, sorted (none for a row without units)."""
    hashes, offsets = ngram_hashes(*_flat([np.zeros(0, np.uint64) if one is None else one for one in units]), NGRAM)
    return [np.unique(hashes[offsets[i]:offsets[i + 1]]) for i in range(len(units))]


def find_duplicates(store: str | os.PathLike[str], name: str, *, threshold: float = 0.8, spec: str | None = None,
                    jobs: int | None = None, progress: CountProgress | None = None) -> Evidence.StoredRun:
    """Find the store's near-duplicate rows at ``threshold`` (verified Jaccard of word 5-grams, or
    with ``spec`` of token 5-grams of the tokens it stored) and store them as list ``name``; its record."""
    if not 0 < threshold <= 1:
        raise UsageError(f"--threshold {threshold}: a Jaccard above 0 and at most 1")
    started = time.perf_counter()
    with EntryReader(store) as reader:
        Evidence(reader.handle).refuse_taken(name)
        units: Units = Words()
        if spec is not None:
            stored = read_spec(reader.handle, spec)
            tokens = open_tokens(reader.handle, store, stored, required=True)
            assert tokens is not None
            units = Tokens(tokens)
        rows: list[Row] = []
        keys: list[np.ndarray] = []
        span = Datasets(reader.handle).entry_range()
        done, total = 0, 0 if span is None else span[1] - span[0] + 1
        for entries, found in RowPass(reader, partial(_band_keys, units)).run(max(1, jobs or os.cpu_count() or 1)):
            rows.extend(found.rows)
            keys.append(found.keys)
            done += entries
            if progress is not None:
                progress(done, total)
        pairs = candidate_pairs(np.concatenate(keys) if keys else np.zeros((0, BANDS), dtype=np.uint64))
        flagged = clusters(pairs, _Verifier(reader, rows, threshold, pairs, units).similar)
        read = reader.identity
    found_rows = [(entry, _representative(rows[one.representative], entry - rows[one.row].first), one.jaccard)
                  for one in flagged for entry in _entries(rows[one.row])]
    params = {"threshold": threshold, "ngram": NGRAM, "units": units.name, "permutations": PERMUTATIONS,
              "bands": BANDS, "band_rows": BAND_ROWS, "seed": SEED, "minhash": f"rensa {version('rensa')} RMinHash",
              "answer_jaccard": min(ANSWER_JACCARD, threshold), "rows": len(rows), "candidates": len(pairs),
              "flagged_rows": len(flagged)}
    if isinstance(units, Tokens):
        params["spec"], params["spec_fingerprint"] = spec, units.tokens.fingerprint
    with rewriting(store, unchanged=read, task="finding duplicates", command="dedup") as connection:
        return Evidence(connection).save_duplicates(name, params, found_rows, seconds=time.perf_counter() - started)


def _entries(row: Row) -> range:
    return range(row.first, row.first + row.entries)


def _representative(row: Row, cut_index: int) -> int:
    """The representative row's entry that stands for a member's ``cut_index``-th entry: the same
    cut where it has one, else its last."""
    return row.first + min(cut_index, row.entries - 1)


class _Verifier:
    """Verifies candidate pairs: the rows of every pair read again, their 5-gram sets (whole,
    supervised) made a batch of rows at a time and kept (about 3 KB a row of 190 words)."""

    def __init__(self, reader: EntryReader, rows: list[Row], threshold: float, pairs: np.ndarray,
                 units: Units) -> None:
        self.reader, self.rows, self.threshold, self.units = reader, rows, threshold, units
        self.sets: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        needed = np.unique(pairs).tolist()
        for start in range(0, len(needed), _ROWS_PER_BATCH):
            self._read(needed[start:start + _ROWS_PER_BATCH])

    def _read(self, indexes: list[int]) -> None:
        rows = [self.rows[i] for i in indexes]
        whole, supervised = (_ngram_sets(self.units.of(self.reader, rows, supervised=side)) for side in (False, True))
        self.sets.update(zip(indexes, zip(whole, supervised)))

    def _of(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if index not in self.sets:  # a representative's pair with a member LSH did not pair: read now
            self._read([index])
        return self.sets[index]

    def similar(self, one: int, other: int) -> float | None:
        (whole_a, said_a), (whole_b, said_b) = self._of(one), self._of(other)
        whole = jaccard(whole_a, whole_b)
        if whole < self.threshold or jaccard(said_a, said_b) < min(ANSWER_JACCARD, self.threshold):
            return None
        return round(whole, 6)

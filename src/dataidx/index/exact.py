"""Exact duplicates of a build: the entries that share their messages, or their prompt side, with
another entry, across datasets and formats.

Each chunk's entries are fingerprinted as the build converts them (:mod:`dataidx.convert.fingerprints`,
in NumPy: a few percent of the build). Once the last dataset is read, the entries whose
fingerprints meet another's are the candidates: their rows are read again and their whole
messages hashed (:mod:`dataidx.convert.digests`, a 128-bit xxh3), and only entries that share
a digest are written (``entry_digests``), both digests each, so that ``same_prompts`` can count a
prompt's distinct answers. Equal messages always have equal fingerprints, so the groups are the
ones hashing every entry would give, for the cost of hashing the candidates. Held meanwhile: 25
bytes an entry (0.5 GB at 20M entries).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..convert import (
    EntryDigests,
    EntryPrints,
    SampleDigests,
    collecting_drops,
    concatenated_digests,
    concatenated_prints,
    expanded_row,
    table_digests,
)
from ..plugins import Plugin
from ..sources import RowSource
from ..store import Datasets
from .chunking import vectorised


@dataclass(frozen=True, kw_only=True)
class ExactSummary:
    """What the build found: entries whose messages another entry has (beyond each group's first),
    the groups, entries sharing a prompt side, the candidates hashed, and the seconds it took."""

    copies: int = 0
    groups: int = 0
    same_prompts: int = 0
    candidates: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class _Source:
    """Where a dataset's candidate rows are read again: its rows, converter and first entry."""

    name: str
    rows: RowSource
    converter: Plugin
    first_entry: int


class ExactGroups:
    """The fingerprints of a build's entries, in entry order, and the groups they form."""

    def __init__(self) -> None:
        self.prints: list[EntryPrints] = []
        self.rows: list[np.ndarray] = []
        self.sources: list[_Source] = []
        self.entries = 0
        self.seconds = 0.0

    def add_dataset(self, name: str, rows: RowSource, converter: Plugin, first_entry: int) -> None:
        self.sources.append(_Source(name, rows, converter, first_entry))

    def add(self, first_id: int, rows: np.ndarray, prints: Callable[[], EntryPrints]) -> None:
        """A chunk's entries' rows and what computes their fingerprints. The build calls this once
        the chunk's write is submitted: the fingerprints are computed while the writer thread
        inserts the chunk, and cost the build's wall time a few percent (docs/performance.md)."""
        if first_id != self.entries + 1:
            raise AssertionError(f"chunk fingerprints from entry {first_id}, after {self.entries} entries")
        started = time.perf_counter()
        found = prints()
        self.seconds += time.perf_counter() - started
        if len(found.messages) != len(rows):
            raise AssertionError(f"{len(found.messages)} fingerprints for {len(rows)} entries")
        self.prints.append(found)
        self.rows.append(rows)
        self.entries += len(rows)

    def write(self, datasets: Datasets) -> ExactSummary:
        """Hash the candidates and write the entries of groups."""
        started = time.perf_counter()
        prints = concatenated_prints(self.prints)
        self.prints = []
        candidates = np.flatnonzero(shared(prints.messages) | shared(prints.prompts, among=prints.has_prompt))
        if not len(candidates):
            return ExactSummary(seconds=self.seconds + time.perf_counter() - started)
        rows = np.concatenate(self.rows)
        self.rows = []
        ids, digests = self._digests(candidates, rows)
        same_messages = shared(digests.messages)
        same_prompt = shared(digests.prompts, among=digests.has_prompt)
        datasets.add_digests(_rows_of(ids, digests, same_messages | same_prompt))
        groups = len(np.unique(digests.messages[same_messages]))
        return ExactSummary(copies=int(same_messages.sum()) - groups, groups=groups,
                            same_prompts=int(same_prompt.sum()), candidates=len(candidates),
                            seconds=self.seconds + time.perf_counter() - started)

    def _digests(self, candidates: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, EntryDigests]:
        """Entry ids (from 1) and digests of every entry of the candidates' rows."""
        found_ids, found = [], []
        for number, source in enumerate(self.sources):
            first = source.first_entry - 1
            end = self.sources[number + 1].first_entry - 1 if number + 1 < len(self.sources) else len(rows)
            inside = candidates[(candidates >= first) & (candidates < end)]
            if not len(inside):
                continue
            dataset_rows = rows[first:end]
            wanted = np.unique(dataset_rows[inside - first])
            offsets = np.flatnonzero(_members(dataset_rows, wanted))  # every entry of those rows, in order
            for chunk_rows, digests in _read_again(source, wanted):
                at = np.searchsorted(dataset_rows[offsets], [chunk_rows[0], chunk_rows[-1] + 1])
                chunk_offsets = offsets[at[0]:at[1]]
                if len(chunk_offsets) != len(digests.messages):
                    raise AssertionError(f"dataset '{source.name}': rows read again give {len(digests.messages)} "
                                         f"entries where the build found {len(chunk_offsets)}")
                found_ids.append(chunk_offsets + first + 1)
                found.append(digests)
        return np.concatenate(found_ids), concatenated_digests(found)


#: Rows taken again at a time (a table of them is held while they are hashed).
ROWS_PER_TAKE = 1 << 16


def _read_again(source: _Source, wanted: np.ndarray) -> Iterator[tuple[np.ndarray, EntryDigests]]:
    """Rows ``wanted`` (ascending), some at a time: those rows and their entries' digests. A source
    of Arrow files gives them as a table taken from its mapped batches (a batch no row is in is
    not read), hashed a table at a time; any other is read and converted row by row."""
    converter = source.converter
    for start in range(0, len(wanted), ROWS_PER_TAKE):
        here = wanted[start:start + ROWS_PER_TAKE]
        table = source.rows.take(here.tolist()) if converter.fast is not None else None
        found = converter.fast(table) if table is not None and converter.fast is not None and vectorised(table) \
            else None
        digests = table_digests(converter.name, table, found) if found is not None and table is not None else None
        yield here, digests if digests is not None else _converted_digests(source, here)
    source.rows.release()


def _converted_digests(source: _Source, rows: np.ndarray) -> EntryDigests:
    """The rows converted again, one by one, and hashed."""
    digests = SampleDigests()
    with collecting_drops():  # counted by the build already
        for row in rows.tolist():
            sample, cuts, _ = expanded_row(source.converter.func, source.rows.row(row), source.name, row,
                                           source.converter.name)
            digests.add(sample, cuts)
    return digests.result()


def _rows_of(ids: np.ndarray, digests: EntryDigests, kept: np.ndarray) -> list[tuple[int, str, str | None]]:
    """``(entry id, messages digest, prompt digest or None)`` of the entries ``kept`` marks, in id order."""
    order = np.flatnonzero(kept)
    order = order[np.argsort(ids[order])]
    prompts = [prompt if has else None for prompt, has in zip(_hex(digests.prompts[order]),
                                                              digests.has_prompt[order].tolist())]
    return list(zip(ids[order].tolist(), _hex(digests.messages[order]), prompts))


def shared(values: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
    """Per value (of those ``among`` marks), whether another one equals it: fingerprints (uint64)
    or digests (16 bytes). Fingerprints are sorted first (0.6 ms for 187k): when none repeat,
    that is all."""
    found = np.zeros(len(values), dtype=bool)
    index = np.arange(len(values)) if among is None else np.flatnonzero(among)
    keys = values[index]
    if keys.dtype.kind == "V":  # digests: ordered by their two halves
        halves = keys.view(np.uint64).reshape(-1, 2)
        order = np.lexsort((halves[:, 1], halves[:, 0]))
        ordered = halves[order]
        same = (ordered[1:] == ordered[:-1]).all(axis=1)
    else:
        if not (np.diff(np.sort(keys)) == 0).any():
            return found
        order = np.argsort(keys)
        ordered = keys[order]
        same = ordered[1:] == ordered[:-1]
    grouped = np.zeros(len(index), dtype=bool)
    grouped[1:] |= same
    grouped[:-1] |= same
    found[index[order[grouped]]] = True
    return found


def _members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in ``sorted_set`` (a binary search each: np.isin sorts both)."""
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _hex(digests: np.ndarray) -> list[str]:
    text = digests.tobytes().hex()
    return [text[at: at + 32] for at in range(0, len(text), 32)]


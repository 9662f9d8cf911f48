"""Where the stored words of a mixture's training entries, or of a plan's packs, lie in the spec's
token file, in the order DataEngine or PackedDataset serves them, a chunk at a time.

An export reads every entry once, so it reads placements as arrays: a chunk of mixture positions
becomes base entry ids by arithmetic (:meth:`.StoreReader.entry_ids`) and one query, a chunk of
packs one query; memory is a chunk's, whatever the mixture's size.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import StoreError, UsageError
from ..pack import RenderedPacks
from ..render import RenderedMixture, TokenFile
from ..store import Closable, Plans, Specs

#: Entries (or packs) whose placements one query reads.
ENTRIES_PER_QUERY = 1 << 14

_BY_ENTRY = Specs.FETCH_PLACEMENTS


@dataclass(frozen=True)
class Placements:
    """Consecutive documents (training entries, or packs of several sequences) of an export."""

    #: the index (training entry or pack) of the first document, for messages
    first: int
    #: per sequence: offset of its first word, its tokens, whether it is a preference pair
    offsets: np.ndarray
    tokens: np.ndarray
    pairs: np.ndarray
    #: sequence number in this chunk -> its loss weights as runs, where they are not the usual 1/0
    weights: dict[int, bytes]
    #: sequence number in this chunk -> its ``extra_info``, where it has one
    extra_info: dict[int, str]
    #: sequences per document
    documents: np.ndarray


def _placements(first: int, rows: list[tuple], documents: np.ndarray, store: str, spec: str) -> Placements:
    """Placements from ``(key, offset, tokens, side tokens, weights, ..., extra info)`` rows in
    served order."""
    if any(row[1] is None for row in rows):
        raise StoreError(f"{store}: an entry of spec '{spec}' trains but has no stored tokens; the store is damaged: "
                         "run dataidx render --store-tokens again")
    numbers = np.array([(row[1], row[2], row[3] is not None) for row in rows], dtype=np.int64).reshape(-1, 3)
    weights = {number: row[4] for number, row in enumerate(rows) if row[4] is not None}
    extra_info = {number: row[-1] for number, row in enumerate(rows) if row[-1] is not None}
    return Placements(first, numbers[:, 0], numbers[:, 1], numbers[:, 2].astype(bool), weights, extra_info,
                      documents)


class MixtureWords(Closable):
    """The training entries of a mixture's epoch under a spec with stored tokens, one document
    (and one sequence) each, in the order DataEngine(store, render=spec) serves them."""

    packed = False

    def __init__(self, store: str | os.PathLike[str], spec: str, *, mixture: str = "default", epoch: int = 0,
                 verify: bool = True) -> None:
        self.rendered = RenderedMixture(store, mixture, spec=spec, epoch=epoch, verify=verify, stored_only=True)
        assert self.rendered.tokens is not None  # stored_only
        self.tokens: TokenFile = self.rendered.tokens
        self.documents = len(self.rendered)
        self.what = f"{self.rendered.reader.serving} under spec '{spec}'"

    def close(self) -> None:
        self.rendered.close()

    def chunks(self, size: int = ENTRIES_PER_QUERY) -> Iterator[Placements]:
        reader, positions = self.rendered.reader, self.rendered.positions
        for start in range(0, self.documents, size):
            indices = np.arange(start, min(start + size, self.documents), dtype=np.int64)
            entry_ids = reader.entry_ids(indices if positions is None else positions[indices])
            unique = np.unique(entry_ids)
            found = {row[0]: row for row in reader.fetch(_BY_ENTRY, self.rendered.spec.id,
                                                         json.dumps(unique.tolist()))}
            if len(found) != len(unique):
                raise StoreError(f"{reader.path}: spec '{self.rendered.spec.name}' does not cover every entry of "
                                 f"{reader.serving}; the store is damaged")
            rows = [found[entry_id] for entry_id in entry_ids.tolist()]
            yield _placements(start, rows, np.ones(len(rows), dtype=np.int64), reader.path, self.tokens.spec)


class PlanWords(Closable):
    """The packs of a plan's epoch, one document of several sequences each, in the order
    PackedDataset serves them; its spec is the plan's (``spec``, if given, must be it)."""

    packed = True

    def __init__(self, store: str | os.PathLike[str], plan: str, *, spec: str | None = None,
                 mixture: str | None = None, epoch: int = 0, verify: bool = True) -> None:
        self.packs = RenderedPacks(store, plan, epoch=epoch, verify=verify, stored_only=True)
        try:
            for asked, given, option in ((spec, self.packs.spec.name, "spec"), (mixture, self.packs.mixture,
                                                                              "mixture")):
                if asked is not None and asked != given:
                    raise UsageError(f"plan '{plan}' packs {option} '{given}', not '{asked}'; leave out --{option} "
                                     "or choose a plan of it")
            if self.packs.merge_cuts != "no":
                raise UsageError(f"plan '{plan}' merges cuts ({self.packs.merge_cuts}): its sequences are built from "
                                 "several entries' words on fetch, which a token file of documents cannot say; export "
                                 "a plan made without --merge-cuts")
        except BaseException:
            self.packs.close()
            raise
        assert self.packs.tokens is not None  # stored_only
        self.tokens: TokenFile = self.packs.tokens
        self.documents = len(self.packs)
        self.what = f"plan '{plan}'" + (f", epoch {self.packs.epoch}" if len(self.packs.epochs) > 1 else "")

    def close(self) -> None:
        self.packs.close()

    def chunks(self, size: int = ENTRIES_PER_QUERY) -> Iterator[Placements]:
        packs = self.packs
        for start in range(0, self.documents, size):
            stop = min(start + size, self.documents)
            first = packs.first_pack + start
            rows = Plans(packs.reader.handle).placements(packs.spec.id, packs.plan_id, first,
                                                         packs.first_pack + stop - 1)
            numbers = np.array([(row[0], row[5], row[6]) for row in rows], dtype=np.int64).reshape(-1, 3)
            documents = np.bincount(numbers[:, 0] - first, minlength=stop - start)
            if len(documents) != stop - start or not documents.all():
                raise StoreError(f"{packs.reader.path}: plan '{packs.plan}' has packs with no stored members; the "
                                 "store is damaged")
            if not (numbers[:, 1].all() and np.array_equal(documents[numbers[:, 0] - first], numbers[:, 2])):
                raise StoreError(f"{packs.reader.path}: plan '{packs.plan}' has packs whose members are missing or "
                                 f"do not train under spec '{packs.spec.name}'; the store is damaged or was edited "
                                 "(dataidx verify says what else is)")
            yield _placements(start, rows, documents, packs.reader.path, self.tokens.spec)

"""A render spec's stored lengths, as a mixture's token budgets and token counts read them.

Read once per mixture, before its write begins (two 4-byte arrays and a flag per base entry),
and sliced per dataset: a budget draws from a dataset's slice, and every draw of a mixture drawn
under a spec records its training entries and their tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..store import ReadIdentity, Specs, open_store
from .budgets import Lengths


@dataclass(frozen=True)
class MixtureLengths:
    """Spec ``spec``'s tokens and supervised tokens of every base entry, and which train."""

    spec: str
    fingerprint: str
    tokens: Specs.Lengths
    supervised: Specs.Lengths

    def _slice(self, lengths: Specs.Lengths, first_entry: int, entries: int) -> slice:
        start = first_entry - lengths.first
        if start < 0 or start + entries > len(lengths.tokens):
            raise ValueError(f"render spec '{self.spec}' does not cover entries {first_entry}..")
        return slice(start, start + entries)

    def of(self, key: str, first_entry: int, entries: int) -> Lengths:
        """A dataset's lengths (``key`` is ``tokens`` or ``supervised_tokens``) and trains flags."""
        lengths = self.tokens if key == "tokens" else self.supervised
        where = self._slice(lengths, first_entry, entries)
        return Lengths(lengths.tokens[where], lengths.trains[where])

    def spent(self, first_entry: int, counts: np.ndarray) -> dict[str, int]:
        """The training entries a draw took (``counts`` per entry) and their tokens and supervised tokens."""
        where = self._slice(self.tokens, first_entry, len(counts))
        trains = self.tokens.trains[where]
        taken = np.where(trains, counts, 0).astype(np.int64)
        return {"training_entries": int(taken.sum()),
                "tokens": int(np.dot(taken, self.tokens.tokens[where].astype(np.int64))),
                "supervised_tokens": int(np.dot(taken, self.supervised.tokens[where].astype(np.int64)))}


def read_mixture_lengths(store: str | os.PathLike[str], spec: str) -> tuple[MixtureLengths, ReadIdentity]:
    """Spec ``spec``'s lengths in ``store``, and what they were read from."""
    with open_store(store) as handle:
        specs = Specs(handle)
        found = specs.get(spec)
        spec_id, fingerprint = found["id"], found["fingerprint"]
        lengths = MixtureLengths(spec, fingerprint, specs.lengths(spec_id), specs.lengths(spec_id, "supervised_tokens"))
        return lengths, ReadIdentity.of(handle, spec=spec)

"""What :class:`.records.Plans` takes and returns: an epoch's packs to write, a plan as a reader
serves it, one epoch of a stored plan. Light at import: NumPy's arrays are named, never imported."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, kw_only=True)
class EpochPacks:
    """One epoch's plan: ``members`` holds every member, pack after pack, as
    ``position << 32 | entry_id``; ``sizes`` and ``tokens`` each pack's member count and tokens.
    ``positions`` counts the positions packed and ``left_out`` those whose entries do not train
    (the columns ``entries`` and ``left_out`` of ``plan_epochs``)."""

    seed: int
    members: np.ndarray
    sizes: np.ndarray
    tokens: np.ndarray
    positions: int
    left_out: int
    #: members trained as one sequence with the next (``--merge-cuts``), or None
    joined: np.ndarray | None = None
    #: ``(outcome, rows, entries, cut tokens, tokens)`` of the epoch's conversations under ``--merge-cuts``
    merges: tuple[tuple[str, int, int, int, int], ...] = ()

    @property
    def total_tokens(self) -> int:
        return int(self.tokens.sum()) if len(self.tokens) else 0


class StoredPlan(NamedTuple):
    """A plan as a reader serves it: its id, capacity, spec, mixture and ``merge_cuts``, and the
    topology it was made for (None, None and ``tokens`` for one made for none)."""

    id: int
    capacity: int
    spec: str
    mixture: str
    merge_cuts: str
    world_size: int | None = None
    micro_batches: int | None = None
    balance: str = "tokens"
    strategy: str = "best-fit"


class PlanEpoch(NamedTuple):
    """One epoch of a plan: its packs are ``first_pack .. first_pack + packs - 1``."""

    epoch: int
    seed: int
    first_pack: int
    packs: int
    entries: int
    tokens: int
    fill: float
    left_out: int

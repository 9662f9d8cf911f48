"""The mixtures a store describes, as readers need them (its datasets: :mod:`.base.records`).

Read through a :class:`~dataidx.store.handle.StoreHandle`: opening a store for training reads
these and nothing heavier.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError, StaleStoreError, UsageError, hide_passwords
from .connect import reading
from .dialect import Reads
from .handle import Store, StoreHandle

logger = logging.getLogger(__name__)
#: ``(store, mixture)`` pairs whose wrapping ``set_epoch`` this process has logged (see :func:`served_epoch`).
_WRAPPED: set[tuple[str, str]] = set()

#: What became of an entry's reasoning, worst first (``entry_renders.reasoning``; NULL: it has
#: none). The first four are problems ``info``, ``compose`` and the report count.
REASONING = ("dropped", "unclosed", "no_answer", "mode_mismatch", "inline", "kept")
REASONING_PROBLEMS = REASONING[:4]
#: The count of each reasoning problem, as further columns of a select over ``entry_renders AS l``.
REASONING_PROBLEM_SUMS = "".join(f", sum(CASE WHEN l.reasoning = '{problem}' THEN 1 ELSE 0 END)"
                                 for problem in REASONING_PROBLEMS)


@dataclass(frozen=True, kw_only=True)
class StoredMixture:
    """One epoch of a mixture: its positions are global rowids ``start .. start + positions - 1``.

    ``stretches`` holds every epoch's ``(start, positions)``; each is drawn with its own seed
    (``mixture_epochs``). ``positions`` counts the epoch's positions (the column
    ``mixture_epochs.entries``), not base entries: an entry drawn twice fills two positions.
    """

    id: int
    name: str
    start: int
    positions: int
    epoch: int = 0
    stretches: tuple[tuple[int, int], ...] = ()

    @property
    def epochs(self) -> int:
        return len(self.stretches) or 1

    def at(self, epoch: int) -> StoredMixture:
        """Epoch ``epoch`` of the same mixture (a NotFoundError for one it does not have)."""
        epoch = check_epoch(epoch, self.epochs, self.name)
        start, positions = self.stretches[epoch]
        return StoredMixture(id=self.id, name=self.name, start=start, positions=positions, epoch=epoch,
                             stretches=self.stretches)


def read_epochs(handle: StoreHandle, mixture_id: int) -> list[tuple[int, int]]:
    """``(start, positions)`` of each epoch of a mixture, in epoch order."""
    return handle.all("SELECT start, entries FROM mixture_epochs WHERE mixture_id = {mark} ORDER BY epoch", mixture_id)


def read_mixture(handle: StoreHandle, name: str, epoch: int = 0) -> StoredMixture:
    """Epoch ``epoch`` of the stored mixture ``name``, or a NotFoundError listing the mixtures
    there are (also for an epoch it does not have)."""
    row = handle.one("SELECT id, name FROM mixtures WHERE name = {mark}", name)
    if row is None:
        raise handle.missing("mixtures", "mixture", name)
    stale = stale_budget_mixtures(handle, mixture=name, store=handle.name)
    if stale:
        raise StaleStoreError(f"{handle.name}: {stale[name]}")
    stretches = tuple(read_epochs(handle, row[0]))
    return StoredMixture(id=row[0], name=row[1], start=0, positions=0, stretches=stretches).at(epoch)


# Mixtures drawn by token budgets whose render spec is gone or holds other lengths than those
# drawn by: of every mixture, of one, or of those drawn under one spec.
_STALE_BUDGETS = """
SELECT m.name, m.spec, s.fingerprint IS NULL FROM mixtures AS m LEFT JOIN render_specs AS s ON s.name = m.spec
WHERE m.spec IS NOT NULL AND (s.fingerprint IS NULL OR s.fingerprint <> m.spec_fingerprint)
  AND EXISTS (SELECT 1 FROM mixture_datasets AS md WHERE md.mixture_id = m.id
              AND (md.token_budget IS NOT NULL OR md.supervised_token_budget IS NOT NULL))"""
_STALE_OF = {"all": _STALE_BUDGETS + " ORDER BY m.id",
             "mixture": _STALE_BUDGETS + " AND m.name = {mark} ORDER BY m.id",
             "spec": _STALE_BUDGETS + " AND m.spec = {mark} ORDER BY m.id"}


def stale_budget_mixtures(reads: Reads, *, mixture: str | None = None, spec: str | None = None,
                          store: object = "STORE") -> dict[str, str]:
    """Mixture name -> why it cannot be served: its token budgets were met under lengths its
    render spec no longer holds (the spec was rendered again, or removed). ``mixture`` or
    ``spec`` narrows the search."""
    which, parameters = ("mixture", (mixture,)) if mixture is not None else \
        ("spec", (spec,)) if spec is not None else ("all", ())
    found = {}
    for name, under, removed in reads.all(_STALE_OF[which], *parameters):
        change = "which was removed since" if removed else "which was rendered again since, with other lengths"
        found[name] = (f"mixture '{name}' was drawn by token budgets under render spec '{under}', {change}: its "
                       f"budgets count lengths the store no longer holds; draw it again with dataidx remove-mixture "
                       f"{store} {name}, then dataidx mix {store} CONFIG --name {name} --spec {under}")
    return found


def mixture_epochs(store: Store | StoreHandle, mixture: str) -> int:
    """How many epochs mixture ``mixture`` of ``store`` holds."""
    with reading(store) as handle:
        return read_mixture(handle, mixture).epochs


def serving(mixture: str, epoch: int, epochs: int) -> str:
    """``mixture 'x'``, or ``mixture 'x', epoch 1 of 3`` when it has several: how messages name what
    a reader serves."""
    return f"mixture '{mixture}'" + (f", epoch {epoch} of {epochs}" if epochs > 1 else "")


def epoch_number(epoch: Any) -> int:
    """``epoch`` as an int: any integral (NumPy, torch integers too); a bool, float or other a UsageError."""
    if not isinstance(epoch, bool):
        try:
            return operator.index(epoch)
        except TypeError:
            pass
    raise UsageError(f"an epoch is a whole number (int, NumPy or torch integer), not {type(epoch).__name__} {epoch!r}")


def check_epoch(epoch: Any, epochs: int, mixture: str) -> int:
    """``epoch`` when mixture ``mixture`` of ``epochs`` epochs has it, else a NotFoundError saying which it has."""
    number = epoch_number(epoch)
    if not 0 <= number < epochs:
        have = "epoch 0" if epochs == 1 else f"epochs 0-{epochs - 1}"
        raise NotFoundError(f"mixture '{mixture}' has {have}, not epoch {number} (dataidx mix --epochs N stores more)")
    return number


def served_epoch(epoch: Any, epochs: int, mixture: str, store: object) -> int:
    """The stored epoch a trainer's ``set_epoch(epoch)`` serves: ``epoch % epochs``. Trainers
    (accelerate, ``transformers.Trainer``) call it every epoch whatever the store holds, so an
    epoch past the stored ones wraps, logged once per process, store and mixture; a negative
    one, or one that is not a whole number, is refused."""
    number = epoch_number(epoch)
    if number < 0:
        raise UsageError(f"mixture '{mixture}': an epoch is 0 or more, not {number}")
    if number >= epochs and (str(store), mixture) not in _WRAPPED:
        _WRAPPED.add((str(store), mixture))
        stored = "1 epoch" if epochs == 1 else f"{epochs} epochs"
        logger.warning("%s: mixture '%s' stores %s: set_epoch(%d) serves epoch %d, and every epoch k serves "
                       "epoch k %% %d (dataidx mix --epochs N stores more draws); not repeated",
                       hide_passwords(str(store)), mixture, stored, number, number % epochs, epochs)
    return number % epochs

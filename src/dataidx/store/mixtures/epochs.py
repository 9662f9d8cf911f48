"""A stored mixture's epochs: where each lies, which one a reader serves, and how messages name
it. Plain arithmetic on epoch numbers, shared by every reader of a mixture (entries, packs,
training states)."""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any

from ...errors import NotFoundError, UsageError, hide_passwords

logger = logging.getLogger(__name__)
#: ``(store, mixture)`` pairs whose wrapping ``set_epoch`` this process has logged (see :func:`served_epoch`).
_WRAPPED: set[tuple[str, str]] = set()


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

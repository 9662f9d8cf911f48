"""What a dataidx dataset puts in a ``StatefulDataLoader`` state: the epoch it served and what it read.

Item ``i`` of a dataset is a function of the store and the epoch alone, so that is all a loader
state needs besides its sampler's position; torchdata saves it through the dataset's
``state_dict`` (in each worker too) and hands it back to ``load_state_dict`` on a restore. The
store is named by its :class:`~dataidx.store.ReadIdentity` (digests of the build and of the
mixture, spec or plan read), never by its path: a state resumes over a moved or copied store,
and is refused over another draw, whose positions mean other entries.
"""

from __future__ import annotations

from typing import Any

from ..errors import StaleStoreError, UsageError
from ..store import Mixtures, ReadIdentity

#: The key that marks a dataidx dataset's state, and its layout's version.
STATE_KEY = "dataidx_dataset_state"
STATE_VERSION = 1
_KINDS = {"mixture": "mixture", "spec": "render spec", "plan": "packing plan"}


def dataset_state(epoch: int, identity: ReadIdentity) -> dict[str, Any]:
    """The state of a dataset serving ``epoch`` of what ``identity`` names."""
    return {STATE_KEY: STATE_VERSION, "epoch": epoch, "reads": [list(part) for part in identity.parts]}


def is_dataset_state(state: Any) -> bool:
    """Whether ``state`` is (or claims to be) a dataidx dataset's."""
    return isinstance(state, dict) and STATE_KEY in state


def describe(identity: ReadIdentity) -> str:
    """``mixture 'x', render spec 'y'``: what a dataset reads, in words."""
    names = [f"{_KINDS.get(kind, kind)} '{name}'" for kind, name in identity.names().items()]
    return ", ".join(names) or "the base index"


def _saved(state: Any) -> tuple[int, ReadIdentity]:
    """The epoch and identity a state records, or a UsageError naming what is wrong with it."""
    if not isinstance(state, dict):
        raise UsageError(f"a dataidx dataset state is a dict, not {type(state).__name__}")
    if state.get(STATE_KEY) != STATE_VERSION:
        raise UsageError(f"not a dataidx dataset state of layout {STATE_VERSION} "
                         f"({STATE_KEY} is {state.get(STATE_KEY)!r:.60})")
    epoch = state.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise UsageError(f"a dataidx dataset state's epoch is a whole number 0 or more, not {epoch!r:.60}")
    return epoch, saved_reads(state.get("reads"), "a dataidx dataset state")


def saved_reads(reads: Any, what: str) -> ReadIdentity:
    """The identity a saved state's ``reads`` record, or a UsageError naming what is wrong with them."""
    if not isinstance(reads, (list, tuple)) or not reads or not all(
            isinstance(part, (list, tuple)) and len(part) == 3 and all(isinstance(v, str) for v in part)
            for part in reads):
        raise UsageError(f"{what}'s reads are [kind, name, digest] triples of strings, not {reads!r:.60}")
    return ReadIdentity(tuple((kind, name, digest) for kind, name, digest in reads))


def check_reads(saved: ReadIdentity, identity: ReadIdentity, *, what: str, where: str = "") -> None:
    """Refuse, naming the mixture, spec or plan (never digests), a ``what`` saved over other data
    than ``identity``: a UsageError for other names, a StaleStoreError for the same names drawn,
    rendered or built again (positions there are other entries)."""
    if saved.names() != identity.names():
        raise UsageError(f"{where}this {what} was saved over {describe(saved)}, not {describe(identity)}; "
                         "resume it over what it was saved with")
    changed = saved.changed(identity)
    if changed:
        raise StaleStoreError(f"{where}this {what} was saved over another draw ({changed} since, or it is another "
                              "store): its positions would be other entries here; resume over the store it was "
                              "saved with")


def check_state(state: Any, *, identity: ReadIdentity, store: str, mixture: str, epochs: int) -> int:
    """The epoch to serve on restoring ``state`` into a dataset that reads ``identity`` of
    ``store`` (mixture ``mixture`` of ``epochs`` epochs); a state saved over anything else is
    refused, in one line."""
    epoch, saved = _saved(state)
    check_reads(saved, identity, what="loader state", where=f"{store}: ")
    return Mixtures.check_epoch(epoch, epochs, mixture)

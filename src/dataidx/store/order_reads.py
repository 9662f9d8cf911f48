"""Reading what a store keeps of training orders: its skip lists and recorded orders (written by
:mod:`.orders`), with the store's own read path only, so ``dataidx info`` loads no SQLAlchemy."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from .connect import reading
from .handle import Store, StoreHandle


@dataclass(frozen=True, kw_only=True)
class StoredSkipList:
    """One skip list as ``info`` and ``compose`` show it."""

    name: str
    who: str
    why: str
    request: str
    entries: int
    created_at: str


_LISTS = ("SELECT l.name, l.who, l.why, l.request, l.entries, l.created_at FROM skip_lists AS l "
          "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} ORDER BY l.id")
_SKIPPED = ("SELECT DISTINCT s.entry_id FROM skipped_entries AS s JOIN skip_lists AS l ON l.id = s.skip_list_id "
            "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} ORDER BY s.entry_id")
_SKIPPED_OF = ("SELECT s.entry_id FROM skipped_entries AS s JOIN skip_lists AS l ON l.id = s.skip_list_id "
               "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} AND l.name = {mark}")


def read_skip_lists(handle: StoreHandle, mixture: str) -> list[StoredSkipList]:
    """The skip lists of ``mixture``, oldest first."""
    return [StoredSkipList(name=name, who=who, why=why, request=request, entries=entries, created_at=created_at)
            for name, who, why, request, entries, created_at in handle.all(_LISTS, mixture)]


def skip_lists_said(store: Store | StoreHandle, mixture: str) -> list[str]:
    """A line per skip list of ``mixture``, as ``compose`` and ``info`` say them."""
    with reading(store) as handle:
        return [f"skip list '{skips.name}': {skips.entries} entries left out of its orders, by {skips.who} "
                f"{skips.created_at}: {skips.why} ({skips.request})" for skips in read_skip_lists(handle, mixture)]


def skipped_entries(handle: StoreHandle, mixture: str, lists: Sequence[str] | None = None) -> list[int]:
    """The base entry ids every skip list of ``mixture`` names together (or only lists ``lists``
    name: a run numbered its steps with the lists in force when it read its order), sorted."""
    if lists is None:
        return [entry_id for entry_id, in handle.all(_SKIPPED, mixture)]
    return sorted({entry_id for name in set(lists) for entry_id, in handle.all(_SKIPPED_OF, mixture, name)})


def orders_said(store: Store | StoreHandle, mixture: str) -> list[str]:
    """A line per recorded order of ``mixture``, as ``info`` says them."""
    found = ("SELECT o.name, o.reads, o.target, o.seed, o.global_batch_size, o.tail, o.steps, "
             "(SELECT count(*) FROM order_trims AS t WHERE t.order_id = o.id) FROM training_orders AS o "
             "JOIN mixtures AS m ON m.id = o.mixture_id WHERE m.name = {mark} ORDER BY o.id")
    with reading(store) as handle:
        lines = []
        for name, reads, target, seed, batch, tail, steps, trims in handle.all(found, mixture):
            steps = json.loads(steps) if isinstance(steps, str) else steps
            what = f"{reads} '{target}'" if target else "the mixture"
            lines.append(f"order '{name}': {what}, seed {seed}, global batch {batch}, {tail}; steps per epoch "
                         f"{', '.join(map(str, steps))}; {trims} entries trimmed (the trimmed view)")
        return lines

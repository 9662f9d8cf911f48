"""Writing what a store keeps of training orders: skip lists (``dataidx skip``), entries a
mixture's orders leave out with who asked, why, and what was asked; and recorded orders
(``dataidx order``), a run's seed, global batch and tail with the entries each stored epoch's
tail trims. Reading them is :mod:`.order_reads` (no SQLAlchemy: ``dataidx info`` stays quick).

A list belongs to a mixture and holds base entries: every position of the mixture (in every
epoch) that holds one is left out of an ``OrderSampler``'s order. Lists are added and removed by
name; they are not part of what a state identifies, so a run resumes across a list added while
it trained (see docs/training-orders.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from sqlalchemy import Connection, delete, insert, select

from ..errors import UsageError
from .handle import missing
from .order_reads import StoredSkipList
from .schema import BaseEntry, Mixture, OrderItem, OrderTrim, SkipListRow, SkippedEntry, TrainingOrderRow
from .write import rewriting


def add_skip_list(store: str | os.PathLike[str], mixture: str, name: str, entry_ids: list[int], *, who: str,
                  why: str, request: str) -> StoredSkipList:
    """Store skip list ``name`` of ``mixture``: base entries ``entry_ids``, who asked, why, and
    what was asked. A name the mixture already has is refused (remove it first)."""
    if not why.strip():
        raise UsageError("a skip list says why: give --why")
    unique = sorted(set(entry_ids))
    if not unique:
        raise UsageError(f"skip list '{name}' names no entries")
    with rewriting(store) as connection:
        mixture_id = connection.execute(select(Mixture.id).where(Mixture.name == mixture)).scalar()
        if mixture_id is None:
            names = list(connection.execute(select(Mixture.name).order_by(Mixture.id)).scalars())
            raise missing("mixture", mixture, store=store, names=names)
        taken = connection.execute(select(SkipListRow.id).where(SkipListRow.mixture_id == mixture_id,
                                                                SkipListRow.name == name)).scalar()
        if taken is not None:
            raise UsageError(f"{store}: mixture '{mixture}' already has a skip list '{name}'; "
                             "dataidx unskip removes it")
        known = connection.execute(select(BaseEntry.id).where(BaseEntry.id.in_(unique))).scalars().all()
        if len(known) != len(unique):
            raise UsageError(f"{store}: entries {sorted(set(unique) - set(known))[:5]} are not in the store")
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        list_id = connection.execute(insert(SkipListRow).values(
            mixture_id=mixture_id, name=name, who=who, why=why, request=request, entries=len(unique),
            created_at=created)).inserted_primary_key[0]  # type: ignore[index]
        connection.execute(insert(SkippedEntry), [{"skip_list_id": list_id, "entry_id": e} for e in unique])
    return StoredSkipList(name=name, who=who, why=why, request=request, entries=len(unique), created_at=created)


def remove_skip_list(store: str | os.PathLike[str], mixture: str, name: str) -> int:
    """Remove skip list ``name`` of ``mixture``; the entries it named."""
    with rewriting(store) as connection:
        found = connection.execute(select(SkipListRow.id, SkipListRow.entries).join(
            Mixture, Mixture.id == SkipListRow.mixture_id).where(Mixture.name == mixture, SkipListRow.name == name)
        ).first()
        if found is None:
            names = list(connection.execute(select(SkipListRow.name).join(
                Mixture, Mixture.id == SkipListRow.mixture_id).where(Mixture.name == mixture)).scalars())
            raise missing("skip list", name, store=store, names=names)
        delete_skip_lists(connection, [found.id])
        return found.entries


def delete_skip_lists(connection: Connection, list_ids: list[int]) -> None:
    """Delete skip lists and their entries (inside a write)."""
    for list_id in list_ids:
        connection.execute(delete(SkippedEntry).where(SkippedEntry.skip_list_id == list_id))
        connection.execute(delete(SkipListRow).where(SkipListRow.id == list_id))


@dataclass(frozen=True, kw_only=True)
class RecordedOrder:
    """A run's order as ``dataidx order`` records it (``reads``: mixture, spec or plan)."""

    name: str
    mixture: str
    reads: str
    target: str | None
    seed: int | None
    global_batch_size: int
    tail: str
    skips: bool
    #: per stored epoch: steps, and the base entries its tail trims
    steps: list[int]
    trimmed: list[list[int]]


#: A chunk of a recorded order's steps: ``(epoch, steps, items, entry ids)``, arrays of one length.
StepChunk = tuple[int, np.ndarray, np.ndarray, np.ndarray]


def save_order(store: str | os.PathLike[str], order: RecordedOrder, steps: Iterable[StepChunk] = ()) -> int:
    """Record ``order`` under its name (a name already recorded is refused: orders are not
    rewritten), with the entries of its steps when ``steps`` gives them (a chunk at a time, so
    memory stays flat whatever the order's size); the step rows written."""
    with rewriting(store) as connection:
        mixture_id = connection.execute(select(Mixture.id).where(Mixture.name == order.mixture)).scalar()
        if mixture_id is None:
            names = list(connection.execute(select(Mixture.name).order_by(Mixture.id)).scalars())
            raise missing("mixture", order.mixture, store=store, names=names)
        if connection.execute(select(TrainingOrderRow.id).where(TrainingOrderRow.name == order.name)).scalar():
            raise UsageError(f"{store}: an order '{order.name}' is recorded already; give the run another name")
        order_id = connection.execute(insert(TrainingOrderRow).values(
            name=order.name, mixture_id=mixture_id, reads=order.reads, target=order.target, seed=order.seed,
            global_batch_size=order.global_batch_size, tail=order.tail, skips=order.skips, steps=order.steps,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )).inserted_primary_key[0]  # type: ignore[index]
        rows = [{"order_id": order_id, "epoch": epoch, "entry_id": entry}
                for epoch, entries in enumerate(order.trimmed) for entry in sorted(set(entries))]
        if rows:
            connection.execute(insert(OrderTrim), rows)
        written = 0
        for epoch, step, item, entry in steps:
            connection.execute(insert(OrderItem), [
                {"order_id": order_id, "epoch": epoch, "step": s, "item": i, "entry_id": e}
                for s, i, e in zip(step.tolist(), item.tolist(), entry.tolist())])
            written += len(step)
    return written


def delete_orders(connection: Connection, mixture_id: int | None = None, *, reads: str = "",
                  target: str = "") -> None:
    """Delete recorded orders and their trims (inside a write): a mixture's, or those that read
    spec or plan ``target`` (``reads``), whose items are gone with it."""
    chosen = (TrainingOrderRow.mixture_id == mixture_id if mixture_id is not None
              else (TrainingOrderRow.reads == reads) & (TrainingOrderRow.target == target))
    for order_id in list(connection.execute(select(TrainingOrderRow.id).where(chosen)).scalars()):
        connection.execute(delete(OrderItem).where(OrderItem.order_id == order_id))
        connection.execute(delete(OrderTrim).where(OrderTrim.order_id == order_id))
        connection.execute(delete(TrainingOrderRow).where(TrainingOrderRow.id == order_id))

"""What a store keeps of training orders, behind one object: skip lists (``dataidx skip``),
entries a mixture's orders leave out with who asked, why, and what was asked; and recorded
orders (``dataidx order``), a run's seed, global batch and tail with the entries each stored
epoch's tail trims.

A list belongs to a mixture and holds base entries: every position of the mixture (in every
epoch) that holds one is left out of an ``OrderSampler``'s order. Lists are added and removed by
name; they are not part of what a state identifies, so a run resumes across a list added while
it trained (see docs/training-orders.md). Reads and writes are templates: reading loads no
SQLAlchemy, so ``dataidx info`` stays quick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...errors import UsageError
from ..base.records import Datasets
from ..handle import missing
from ..sqlite.working_copy import Access, access, writable


@dataclass(frozen=True, kw_only=True)
class StoredSkipList:
    """One skip list as ``info`` and ``compose`` show it."""

    name: str
    who: str
    why: str
    request: str
    entries: int
    created_at: str


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


#: A chunk of a recorded order's steps: ``(epoch, steps, items, entry ids)``, arrays of one length
#: (NumPy's, which this module never imports).
StepChunk = tuple[int, Any, Any, Any]

_LISTS = ("SELECT l.name, l.who, l.why, l.request, l.entries, l.created_at FROM skip_lists AS l "
          "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} ORDER BY l.id")
_SKIPPED = ("SELECT DISTINCT s.entry_id FROM skipped_entries AS s JOIN skip_lists AS l ON l.id = s.skip_list_id "
            "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} ORDER BY s.entry_id")
_SKIPPED_OF = ("SELECT s.entry_id FROM skipped_entries AS s JOIN skip_lists AS l ON l.id = s.skip_list_id "
               "JOIN mixtures AS m ON m.id = l.mixture_id WHERE m.name = {mark} AND l.name = {mark}")
_ORDERS = ("SELECT o.name, o.reads, o.target, o.seed, o.global_batch_size, o.tail, o.steps, "
           "(SELECT count(*) FROM order_trims AS t WHERE t.order_id = o.id) FROM training_orders AS o "
           "JOIN mixtures AS m ON m.id = o.mixture_id WHERE m.name = {mark} ORDER BY o.id")
_MIXTURE_ID = "SELECT id FROM mixtures WHERE name = {mark}"


class Orders:
    """Skip lists and recorded orders, over a store handle (reads) or a writer's connection
    (reads and writes; see :func:`~dataidx.store.sqlite.working_copy.writable`).

    Example::

        with open_store("demo.db") as handle:
            Orders(handle).skipped("default")
    """

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    def skip_lists(self, mixture: str) -> list[StoredSkipList]:
        """The skip lists of ``mixture``, oldest first."""
        return [StoredSkipList(name=name, who=who, why=why, request=request, entries=entries, created_at=created_at)
                for name, who, why, request, entries, created_at in self.store.all(_LISTS, mixture)]

    def skip_lists_said(self, mixture: str) -> list[str]:
        """A line per skip list of ``mixture``, as ``compose`` and ``info`` say them."""
        return [f"skip list '{skips.name}': {skips.entries} entries left out of its orders, by {skips.who} "
                f"{skips.created_at}: {skips.why} ({skips.request})" for skips in self.skip_lists(mixture)]

    def skipped(self, mixture: str, lists: Sequence[str] | None = None) -> list[int]:
        """The base entry ids every skip list of ``mixture`` names together (or only lists ``lists``
        name: a run numbered its steps with the lists in force when it read its order), sorted."""
        if lists is None:
            return [entry_id for entry_id, in self.store.all(_SKIPPED, mixture)]
        return sorted({entry_id for name in set(lists) for entry_id, in self.store.all(_SKIPPED_OF, mixture, name)})

    def said(self, mixture: str) -> list[str]:
        """A line per recorded order of ``mixture``, as ``info`` says them."""
        lines = []
        for name, reads, target, seed, batch, tail, steps, trims in self.store.all(_ORDERS, mixture):
            steps = json.loads(steps) if isinstance(steps, str) else steps
            what = f"{reads} '{target}'" if target else "the mixture"
            lines.append(f"order '{name}': {what}, seed {seed}, global batch {batch}, {tail}; steps per epoch "
                         f"{', '.join(map(str, steps))}; {trims} entries trimmed (the trimmed view)")
        return lines

    def add_skip_list(self, mixture: str, name: str, entry_ids: list[int], *, who: str, why: str,
                      request: str) -> StoredSkipList:
        """Store skip list ``name`` of ``mixture``: base entries ``entry_ids``, who asked, why, and
        what was asked. A name the mixture already has is refused (remove it first)."""
        if not why.strip():
            raise UsageError("a skip list says why: give --why")
        unique = sorted(set(entry_ids))
        if not unique:
            raise UsageError(f"skip list '{name}' names no entries")
        copy = writable(self.store)
        mixture_id = self._mixture_id(mixture)
        if copy.one("SELECT id FROM skip_lists WHERE mixture_id = {mark} AND name = {mark}", mixture_id, name):
            raise UsageError(f"{copy.name}: mixture '{mixture}' already has a skip list '{name}'; "
                             "dataidx unskip removes it")
        absent = Datasets(copy).absent(unique)
        if absent:
            raise UsageError(f"{copy.name}: entries {absent[:5]} are not in the store")
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        list_id = copy.insert("INSERT INTO skip_lists (mixture_id, name, who, why, request, entries, created_at) "
                              "VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark})",
                              mixture_id, name, who, why, request, len(unique), created)
        copy.insert_many("INSERT INTO skipped_entries (skip_list_id, entry_id) VALUES ({mark}, {mark})",
                         [(list_id, entry) for entry in unique])
        return StoredSkipList(name=name, who=who, why=why, request=request, entries=len(unique), created_at=created)

    def remove_skip_list(self, mixture: str, name: str) -> int:
        """Remove skip list ``name`` of ``mixture``; the entries it named."""
        copy = writable(self.store)
        found = copy.one("SELECT l.id, l.entries FROM skip_lists AS l JOIN mixtures AS m ON m.id = l.mixture_id "
                         "WHERE m.name = {mark} AND l.name = {mark}", mixture, name)
        if found is None:
            names = copy.column("SELECT l.name FROM skip_lists AS l JOIN mixtures AS m ON m.id = l.mixture_id "
                                "WHERE m.name = {mark} ORDER BY l.id", mixture)
            raise missing("skip list", name, store=copy.name, names=names)
        self._delete_skip_lists([found[0]])
        return found[1]

    def record(self, order: RecordedOrder, steps: Iterable[StepChunk] = ()) -> int:
        """Record ``order`` under its name (a name already recorded is refused: orders are not
        rewritten), with the entries of its steps when ``steps`` gives them (a chunk at a time, so
        memory stays flat whatever the order's size); the step rows written."""
        copy = writable(self.store)
        mixture_id = self._mixture_id(order.mixture)
        if copy.one("SELECT id FROM training_orders WHERE name = {mark}", order.name):
            raise UsageError(f"{copy.name}: an order '{order.name}' is recorded already; give the run another name")
        order_id = copy.insert(
            "INSERT INTO training_orders (name, mixture_id, reads, target, seed, global_batch_size, tail, skips, "
            "steps, created_at) VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark}, "
            "{mark})",
            order.name, mixture_id, order.reads, order.target, order.seed, order.global_batch_size, order.tail,
            int(order.skips), json.dumps(order.steps), datetime.now(timezone.utc).isoformat(timespec="seconds"))
        copy.insert_many("INSERT INTO order_trims (order_id, epoch, entry_id) VALUES ({mark}, {mark}, {mark})",
                         [(order_id, epoch, entry) for epoch, entries in enumerate(order.trimmed)
                          for entry in sorted(set(entries))])
        written = 0
        for epoch, step, item, entry in steps:
            copy.insert_many("INSERT INTO order_items (order_id, epoch, step, item, entry_id) "
                             "VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
                             [(order_id, epoch, s, i, e)
                              for s, i, e in zip(step.tolist(), item.tolist(), entry.tolist())])
            written += len(step)
        return written

    def remove_of_mixture(self, mixture_id: int) -> None:
        """Delete a mixture's skip lists and recorded orders (its removal)."""
        copy = writable(self.store)
        self._delete_skip_lists(copy.column("SELECT id FROM skip_lists WHERE mixture_id = {mark}", mixture_id))
        self._delete_orders(copy.column("SELECT id FROM training_orders WHERE mixture_id = {mark}", mixture_id))

    def remove_reading(self, reads: str, target: str) -> None:
        """Delete the recorded orders that read spec or plan ``target`` (``reads``), whose items
        are gone with it."""
        self._delete_orders(writable(self.store).column(
            "SELECT id FROM training_orders WHERE reads = {mark} AND target = {mark}", reads, target))

    def _mixture_id(self, mixture: str) -> int:
        found = self.store.one(_MIXTURE_ID, mixture)
        if found is None:
            raise self.store.missing("mixtures", "mixture", mixture)
        return found[0]

    def _delete_skip_lists(self, list_ids: Sequence[int]) -> None:
        copy = writable(self.store)
        for list_id in list_ids:
            copy.execute("DELETE FROM skipped_entries WHERE skip_list_id = {mark}", list_id)
            copy.execute("DELETE FROM skip_lists WHERE id = {mark}", list_id)

    def _delete_orders(self, order_ids: Sequence[int]) -> None:
        copy = writable(self.store)
        for order_id in order_ids:
            for table in ("order_items", "order_trims"):
                copy.execute(f"DELETE FROM {table} WHERE order_id = {{mark}}", order_id)
            copy.execute("DELETE FROM training_orders WHERE id = {mark}", order_id)

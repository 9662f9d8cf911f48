"""What a store keeps of packing plans, behind one object: a plan's row, its epochs (which packs
are whose), its packs (member count and tokens) and their members (a mixture position and its
base entry, in slot order), and what ``--merge-cuts`` made of its conversations.

``dataidx pack`` writes a plan; ``PackedDataset`` and ``dataidx export --plan`` serve its packs a
fetch at a time; ``info``, ``compose --spec`` and the report say what it holds; ``verify`` recounts
it. Reads and writes are templates (see :mod:`dataidx.store.dialect`): reading loads neither
SQLAlchemy nor NumPy, so ``dataidx info`` and ``dataidx steps`` stay quick. A pack's members are a
``packed_entries`` rowid range, so serving a pack or deleting a plan is a range scan.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ...errors import NotFoundError, StoreError
from ..handle import StoreHandle
from ..orders.records import Orders
from ..sqlite.working_copy import Access, access, writable
from .rows import EpochPacks, PlanEpoch, StoredPlan

# A pack's members with what each needs to be served, and the count its pack records: a member
# row missing (or another plan's) or a member without its length is found by the count and the
# outer join, not dropped, at no cost a fetch can measure. ``dataidx verify`` checks the rest.
_MEMBERS = (
    "SELECT {stamped}e.entry_id, r.tokens, e.joined, r.status IN ({trains}), k.members FROM packs AS k "
    "JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1 "
    "AND e.plan_id = k.plan_id "
    "LEFT JOIN entry_renders AS r ON r.spec_id = {mark} AND r.entry_id = e.entry_id "
    "WHERE k.plan_id = {mark} AND k.pack = {mark} ORDER BY e.id"
)
#: The packs of a range that hold any of some base entries.
_PACKS_HOLDING = (
    "SELECT DISTINCT {stamped}k.pack FROM packs AS k "
    "JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1 "
    "WHERE k.plan_id = {mark} AND k.pack BETWEEN {mark} AND {mark} AND e.entry_id IN ({ids})"
)
# A range of packs' members with where their stored words lie, whether each trains and how many
# members its pack records: a member row missing or without its length is counted, not dropped.
_PLACEMENTS = (
    "SELECT {stamped}k.pack, r.token_offset, r.tokens, r.side_tokens, r.token_weights, "
    "CASE WHEN r.status IN ({trains}) THEN 1 ELSE 0 END, k.members, r.extra_info FROM packs AS k "
    "JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1 "
    "AND e.plan_id = k.plan_id "
    "LEFT JOIN entry_renders AS r ON r.spec_id = {mark} AND r.entry_id = e.entry_id "
    "WHERE k.plan_id = {mark} AND k.pack BETWEEN {mark} AND {mark} ORDER BY k.pack, e.id"
)
_PLAN = ("SELECT p.id, p.capacity, s.name, m.name, p.merge_cuts, p.world_size, p.micro_batches, p.balance, "
         "p.strategy "
         "FROM packing_plans AS p "
         "JOIN render_specs AS s ON s.id = p.spec_id JOIN mixtures AS m ON m.id = p.mixture_id WHERE p.name = {mark}")
_EPOCHS = ("SELECT epoch, seed, first_pack, packs, entries, tokens, fill, left_out FROM plan_epochs "
           "WHERE plan_id = {mark} AND epoch BETWEEN {mark} AND {mark} ORDER BY epoch")
_FILL = ("SELECT min(k.tokens * {mark} / {mark}, {mark}) AS bin, count(*) FROM packs AS k "
         "WHERE k.plan_id = {mark} AND k.pack BETWEEN {mark} AND {mark} GROUP BY bin ORDER BY bin")
# Per outcome of a plan's --merge-cuts over some epochs; sums cast so PostgreSQL's are integers.
_MERGES = ("SELECT m.outcome, CAST(sum(m.rows) AS bigint) AS rows, CAST(sum(m.entries) AS bigint) AS entries, "
           "CAST(sum(m.cut_tokens) AS bigint) AS cut_tokens, CAST(sum(m.tokens) AS bigint) AS tokens "
           "FROM plan_merges AS m JOIN packing_plans AS p ON p.id = m.plan_id "
           "WHERE p.name = {mark} AND m.epoch BETWEEN {mark} AND {mark} GROUP BY m.outcome "
           "ORDER BY min(CASE m.outcome WHEN 'merged' THEN 0 WHEN 'tree' THEN 1 ELSE 2 END), m.outcome")
_MERGING = ("SELECT p.name AS plan, p.merge_cuts FROM packing_plans AS p "
            "JOIN mixtures AS m ON m.id = p.mixture_id JOIN render_specs AS s ON s.id = p.spec_id "
            "WHERE m.name = {mark} AND s.name = {mark} AND p.merge_cuts <> 'no' ORDER BY p.name")
_OF_SPEC = ("SELECT p.name FROM packing_plans AS p JOIN render_specs AS s ON s.id = p.spec_id WHERE s.name = {mark} "
            "ORDER BY p.id")
_INFO = ("SELECT plan, spec, mixture, capacity, seed, packs, entries, fill, tokens, left_out "
         "FROM pack_plans ORDER BY plan")
_BALANCE_STEPS = ("SELECT epoch, step, max(imbalance) FROM plan_balance WHERE plan = {mark} AND epoch BETWEEN {mark} "
                  "AND {mark} GROUP BY epoch, step ORDER BY epoch, step")
_EPOCH_PACKS = ("SELECT e.packs FROM plan_epochs AS e JOIN packing_plans AS p ON p.id = e.plan_id "
                "WHERE p.name = {mark} ORDER BY e.epoch")
#: What a plan's row is written with (``save``'s ``plan``), then its totals, zero until its epochs are.
_COLUMNS = ("name", "spec_id", "mixture_id", "capacity", "seed", "dataidx_version", "merge_cuts", "world_size",
            "micro_batches", "balance", "cost_a", "cost_b", "strategy", "micro_batch_size")
_TOTALS = ("packs", "entries", "tokens", "left_out", "epochs", "fill", "seconds")
#: Any epoch: the last one a ``BETWEEN`` reaches when none is named.
_LAST = 2**62


class Plans:
    """Packing plans, over a store handle (reads) or a writer's connection (reads and writes; see
    :func:`~dataidx.store.sqlite.working_copy.writable`).

    Example::

        with open_store("demo.db") as handle:
            plan = Plans(handle).find("default")
    """

    #: one epoch's packs as :meth:`save` takes them
    EpochPacks = EpochPacks

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    def find(self, name: str) -> StoredPlan:
        """Plan ``name``; a NotFoundError naming the plans there are when there is none."""
        row = self.store.one(_PLAN, name)
        if row is None:
            raise self.missing(name, "; run dataidx pack")
        return StoredPlan(*row)

    def missing(self, name: str, hint: str = "") -> NotFoundError:
        """The error for a missing plan ``name``, listing the plans the store has."""
        return self.store.missing("packing_plans", "packing plan", name, hint)

    def epochs(self, plan_id: int, first: int = 0, last: int = _LAST) -> list[PlanEpoch]:
        """Epochs ``first..last`` of a plan (every one by default), in order."""
        return [PlanEpoch(*row) for row in self.store.all(_EPOCHS, plan_id, first, last)]

    def members(self, spec_id: int, plan_id: int, pack: int) -> list[tuple[int, int, int, int, int]]:
        """``(entry id, tokens, joined to the next, trains, members its pack records)`` of pack
        ``pack``'s members under spec ``spec_id``, in slot order: one fetch, a reader's hot path."""
        return self.store.fetch(_MEMBERS, spec_id, plan_id, pack)

    def packs_holding(self, plan_id: int, first: int, last: int, entry_ids: list[int]) -> list[int]:
        """Packs ``first..last`` of a plan that hold any of base entries ``entry_ids``, sorted."""
        return sorted(pack for pack, in self.store.fetch(_PACKS_HOLDING, plan_id, first, last, json.dumps(entry_ids)))

    def placements(self, spec_id: int, plan_id: int, first: int, last: int) -> list[tuple]:
        """Per member of packs ``first..last``, in served order: ``(pack, token offset, tokens, side
        tokens, token weights, trains, members its pack records, extra info)`` under spec ``spec_id``."""
        return self.store.fetch(_PLACEMENTS, spec_id, plan_id, first, last)

    def fill_histogram(self, plan_id: int, first: int, last: int, capacity: int, bins: int) -> list[tuple[int, int]]:
        """``(bin, packs)`` of packs ``first..last`` by how full they are, in ``bins`` equal bins."""
        return [(int(b), int(n)) for b, n in self.store.all(_FILL, bins, capacity, bins - 1, plan_id, first, last)]

    def merges(self, plan: str, first: int = 0, last: int = _LAST) -> list[dict[str, Any]]:
        """Per outcome of plan ``plan``'s ``--merge-cuts`` (merged, tree, or why conversations stayed
        cuts), over epochs ``first..last``: rows, entries, tokens as cuts and tokens forwarded; []
        for a plan without it."""
        return self.store.dicts(_MERGES, plan, first, last)

    def merging(self, *, mixture: str, spec: str) -> list[dict[str, Any]]:
        """The plans of ``mixture`` under ``spec`` made with ``--merge-cuts``: ``plan``, ``merge_cuts``
        and ``merges`` (as :meth:`merges`), for ``dataidx compose --spec``."""
        plans = self.store.dicts(_MERGING, mixture, spec)
        for plan in plans:
            plan["merges"] = self.merges(plan["plan"])
        return plans

    def of_spec(self, spec: str) -> list[str]:
        """The names of the plans made from spec ``spec``'s lengths, oldest first."""
        return [name for name, in self.store.all(_OF_SPEC, spec)]

    def info(self) -> list[dict[str, Any]]:
        """Every plan as ``dataidx info --json`` shows it, by name: the view ``pack_plans``'s
        columns, ``epoch_packs`` (steps per epoch follow them, not their sum), ``merge_cuts`` and
        ``merges``."""
        plans = self.store.dicts(_INFO)
        for plan in plans:
            plan["epoch_packs"] = [packs for packs, in self.store.all(_EPOCH_PACKS, plan["plan"])]
            plan["merge_cuts"] = self.store.value("SELECT merge_cuts FROM packing_plans WHERE name = {mark}",
                                                  plan["plan"])
            plan["merges"] = self.merges(plan["plan"])
        return plans

    def problems(self, spec_id: int | None = None) -> list[str]:
        """One line per way a plan (of spec ``spec_id``, or every one) differs from its recount
        (``dataidx verify``)."""
        from .checks import plan_problems  # NumPy: only a recount loads it, not the noun's other reads

        return plan_problems(self._handle(), spec_id)

    def balance_steps(self, name: str, first: int = 0, last: int = _LAST) -> list[tuple[int, int, float]]:
        """``(epoch, step, imbalance)`` of each whole global step of a plan made for a topology
        (the view ``plan_balance``: its costliest rank over the mean); none for another plan."""
        return [(int(epoch), int(step), float(ratio)) for epoch, step, ratio in
                self.store.all(_BALANCE_STEPS, name, first, last)]

    def save(self, plan: dict[str, Any], epochs: Iterable[EpochPacks], started: float) -> dict[str, Any]:
        """Store ``plan`` (its name, spec_id, mixture_id, capacity, seed, dataidx_version,
        merge_cuts, and the topology and balance it was made for) in place of any plan of its
        name, with the packs of each epoch ``epochs`` yields (each is written before the next is
        made). Returns the plan's totals over epochs: packs, entries, tokens, fill, left_out,
        epochs and seconds since ``started``."""
        from .bulk import insert_pack_members, insert_packs  # NumPy and SQLAlchemy: only a write loads them

        copy = writable(self.store)
        self.remove(plan["name"])
        plan_id = copy.insert(
            f"INSERT INTO packing_plans ({', '.join(_COLUMNS + _TOTALS)}, created_at) "
            f"VALUES ({', '.join(['{mark}'] * (len(_COLUMNS) + len(_TOTALS) + 1))})",
            *[plan[column] for column in _COLUMNS], 0, 0, 0, 0, 0, 1.0, 0.0,
            datetime.now(timezone.utc).isoformat(timespec="seconds"))
        totals: dict[str, int] = dict.fromkeys(_TOTALS[:5], 0)
        for number, epoch in enumerate(epochs):
            last = copy.value("SELECT max(id) FROM packed_entries")
            first = (last or 0) + 1  # added in Python: SQLite's + turns 2**63 - 1 + 1 into a float
            insert_pack_members(copy.connection, plan_id, first, epoch.members, epoch.joined)
            copy.insert_many("INSERT INTO plan_merges (plan_id, epoch, outcome, rows, entries, cut_tokens, tokens) "
                             "VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark})",
                             [(plan_id, number, *merge) for merge in epoch.merges])
            insert_packs(copy.connection, plan_id, first_member=first, sizes=epoch.sizes, tokens=epoch.tokens,
                         first_pack=totals["packs"])
            packs, tokens = len(epoch.sizes), epoch.total_tokens
            copy.execute("INSERT INTO plan_epochs (plan_id, epoch, seed, first_pack, packs, entries, tokens, fill, "
                         "left_out) VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark})",
                         plan_id, number, epoch.seed, totals["packs"], packs, epoch.positions, tokens,
                         _fill(tokens, packs, plan["capacity"]), epoch.left_out)
            for key, value in (("packs", packs), ("entries", epoch.positions), ("tokens", tokens),
                               ("left_out", epoch.left_out), ("epochs", 1)):
                totals[key] += value
        done = {**totals, "fill": _fill(totals["tokens"], totals["packs"], plan["capacity"]),
                "seconds": time.perf_counter() - started}
        copy.execute(f"UPDATE packing_plans SET {', '.join(f'{key} = {{mark}}' for key in _TOTALS)} "
                     "WHERE id = {mark}", *[done[key] for key in _TOTALS], plan_id)
        return done

    def remove(self, name: str) -> bool:
        """Delete plan ``name`` with its packs and members, if it exists."""
        found = writable(self.store).one("SELECT id FROM packing_plans WHERE name = {mark}", name)
        self._delete([] if found is None else [found[0]])
        return found is not None

    def remove_of_spec(self, spec_id: int) -> int:
        """Delete the plans made from a spec's lengths (its removal or render again); how many."""
        found = writable(self.store).column("SELECT id FROM packing_plans WHERE spec_id = {mark} ORDER BY id",
                                            spec_id)
        self._delete(found)
        return len(found)

    def remove_of_mixture(self, mixture_id: int) -> None:
        """Delete the plans of a mixture (its removal)."""
        self._delete(writable(self.store).column("SELECT id FROM packing_plans WHERE mixture_id = {mark} "
                                                 "ORDER BY id", mixture_id))

    def _delete(self, plan_ids: Iterable[int]) -> None:
        """Delete plans with their packs and members (a rowid range each), and the orders read over them."""
        copy = writable(self.store)
        for plan_id in plan_ids:
            name = copy.one("SELECT name FROM packing_plans WHERE id = {mark}", plan_id)
            Orders(copy).remove_reading("plan", name[0] if name else "")
            span = copy.one("SELECT min(first_member), max(first_member + members - 1) FROM packs "
                            "WHERE plan_id = {mark}", plan_id)
            if span is not None and span[0] is not None:
                copy.execute("DELETE FROM packed_entries WHERE id BETWEEN {mark} AND {mark}", *span)
            for table in ("packs", "plan_epochs", "plan_merges"):
                copy.execute(f"DELETE FROM {table} WHERE plan_id = {{mark}}", plan_id)
            copy.execute("DELETE FROM packing_plans WHERE id = {mark}", plan_id)

    def _handle(self) -> StoreHandle:
        """The reader's handle a recount reads its arrays through (a write has none)."""
        if not isinstance(self.store, StoreHandle):
            raise StoreError(f"{self.store.name}: a plan's recount reads a store opened to read, not a write")
        return self.store


def _fill(tokens: int, packs: int, capacity: int) -> float:
    """Share of the packs' capacity that holds tokens (1.0 for no packs, as a plan reports it)."""
    return tokens / (packs * capacity) if packs else 1.0


"""Writing a packing plan: its row, and per epoch of its mixture the packs and their members.

``dataidx pack`` plans; this module is where a plan meets the store's tables. Members and packs
travel as packed integers unpacked by SQLite in C (:mod:`.sqlite.bulk`). Each epoch's packs
follow the last epoch's in pack numbering, and ``plan_epochs`` says which are whose.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, insert, select, update

from .deletes import delete_plan
from .schema import PackedEntry, PackingPlanRow, PlanEpoch, PlanMerge
from .sqlite.bulk import insert_pack_members, insert_packs


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


def save_packing_plan(connection: Connection, plan: dict[str, Any], epochs: Iterable[EpochPacks],
                      started: float) -> dict[str, Any]:
    """Store ``plan`` (its name, spec, mixture, capacity and seed) in place of any plan of its
    name, with the packs of each epoch ``epochs`` yields (each is written before the next is
    made). Returns the plan's totals over epochs: packs, entries, tokens, fill, left_out and
    seconds since ``started``."""
    delete_plan(connection, plan["name"])
    inserted = connection.execute(insert(PackingPlanRow).values(
        **plan, packs=0, entries=0, tokens=0, fill=1.0, left_out=0, epochs=0,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=0.0,
    )).inserted_primary_key
    assert inserted is not None  # a one-row INSERT always has its key; SQLAlchemy types it Optional
    plan_id = inserted[0]
    totals = {"packs": 0, "entries": 0, "tokens": 0, "left_out": 0, "epochs": 0}
    for number, epoch in enumerate(epochs):
        last = connection.execute(select(func.max(PackedEntry.id))).scalar_one()
        first = (last or 0) + 1  # added in Python: SQLite's + turns 2**63 - 1 + 1 into a float
        insert_pack_members(connection, plan_id, first, epoch.members, epoch.joined)
        for outcome, rows, entries, cut_tokens, tokens in epoch.merges:
            connection.execute(insert(PlanMerge).values(plan_id=plan_id, epoch=number, outcome=outcome, rows=rows,
                                                        entries=entries, cut_tokens=cut_tokens, tokens=tokens))
        insert_packs(connection, plan_id, first_member=first, sizes=epoch.sizes, tokens=epoch.tokens,
                     first_pack=totals["packs"])
        packs, tokens = len(epoch.sizes), epoch.total_tokens
        connection.execute(insert(PlanEpoch).values(
            plan_id=plan_id, epoch=number, seed=epoch.seed, first_pack=totals["packs"], packs=packs,
            entries=epoch.positions, tokens=tokens, fill=_fill(tokens, packs, plan["capacity"]),
            left_out=epoch.left_out,
        ))
        for key, value in (("packs", packs), ("entries", epoch.positions), ("tokens", tokens),
                           ("left_out", epoch.left_out), ("epochs", 1)):
            totals[key] += value
    done = {**totals, "fill": _fill(totals["tokens"], totals["packs"], plan["capacity"]),
            "seconds": time.perf_counter() - started}
    connection.execute(update(PackingPlanRow).where(PackingPlanRow.id == plan_id).values(**done))
    return done


def _fill(tokens: int, packs: int, capacity: int) -> float:
    """Share of the packs' capacity that holds tokens (1.0 for no packs, as a plan reports it)."""
    return tokens / (packs * capacity) if packs else 1.0

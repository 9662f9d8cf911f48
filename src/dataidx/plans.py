"""``dataidx pack``: best-fit-decreasing packing plans of a mixture under a render spec, stored.

The plan packs every position of the mixture whose entry trains under the spec (status ok or
truncated; the others are counted as ``left_out`` and their status rows say why), shuffles the
pack order with the recorded seed, and stores packs and members so training and SQL read the
same plan. An entry longer than the capacity is refused, not dropped: render with a cutoff that
fits.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from sqlalchemy import delete, insert, select, text

from . import __version__
from .errors import StaleStoreError, StoreError
from .packing import plan_packs
from .positions import position_entries, read_mixture, spec_lengths
from .render_spec import read_spec
from .sampling import DEFAULT_SEED
from .schema import PackedEntry, PackingPlan
from .store import rewriting
from .storefile import connect_readonly

_MEMBERS = text(
    "INSERT INTO packed_entries (plan_id, pack, slot, position, entry_id, tokens) "
    "SELECT :plan, value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(:rows)"
)
CHUNK = 200_000


@dataclass
class PackSummary:
    """A stored plan: how many packs and entries, how full, and how long it took."""

    name: str
    spec: str
    mixture: str
    capacity: int
    seed: int
    packs: int
    entries: int
    tokens: int
    fill: float
    left_out: int
    seconds: float
    plan_seconds: float


def pack_store(
    store: str | os.PathLike[str], spec: str, *, capacity: int, mixture: str = "default", seed: int = DEFAULT_SEED,
    name: str = "default",
) -> PackSummary:
    """Plan packs of ``capacity`` tokens over ``mixture`` with ``spec``'s lengths; store as ``name``.

    Example::

        pack_store("demo.db", "default", capacity=4096, seed=0)
        # SELECT * FROM pack_plans; SELECT * FROM pack_members WHERE plan = 'default' AND pack = 0
    """
    started = time.perf_counter()
    if capacity <= 0:
        raise StoreError(f"capacity must be positive, got {capacity}")
    connection = connect_readonly(store)
    try:
        stamp = connection.execute("PRAGMA user_version").fetchone()[0]
        stored_spec = read_spec(connection, spec, os.fspath(store))
        stored_mixture = read_mixture(connection, mixture, os.fspath(store))
        entries = position_entries(connection, stored_mixture)
        tokens, trains = spec_lengths(connection, stored_spec.id).of(entries)
    finally:
        connection.close()
    positions = np.flatnonzero(trains)
    lengths = tokens[positions]
    too_long = lengths > capacity
    if too_long.any():
        raise StoreError(
            f"{store}: {int(too_long.sum())} entries of mixture '{mixture}' under spec '{spec}' are longer than "
            f"capacity {capacity} (longest {int(lengths.max())} tokens); render with --cutoff {capacity} or less"
        )
    plan_started = time.perf_counter()
    plan = plan_packs(lengths, capacity, seed)
    plan_seconds = time.perf_counter() - plan_started
    rows = _member_rows(plan.packs, positions, entries, lengths)
    summary = PackSummary(name, spec, mixture, capacity, seed, len(plan.packs), len(positions), plan.tokens,
                          plan.fill, int(len(entries) - len(positions)), 0.0, plan_seconds)
    with rewriting(store) as writer:
        if writer.exec_driver_sql("PRAGMA user_version").scalar() != stamp:
            raise StaleStoreError(f"{store}: the store was replaced while planning; run dataidx pack again")
        remove_plan(writer, name)
        plan_id = writer.execute(insert(PackingPlan).values(
            name=name, spec_id=stored_spec.id, mixture_id=stored_mixture.id, capacity=capacity, seed=seed,
            packs=summary.packs, entries=summary.entries, tokens=summary.tokens, fill=summary.fill,
            left_out=summary.left_out, dataidx_version=__version__,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=0.0,
        )).inserted_primary_key[0]
        for offset in range(0, len(rows), CHUNK):
            writer.execute(_MEMBERS, {"plan": plan_id, "rows": json.dumps(rows[offset : offset + CHUNK].tolist())})
        summary.seconds = time.perf_counter() - started
        writer.execute(PackingPlan.__table__.update().where(PackingPlan.id == plan_id).values(seconds=summary.seconds))
    return summary


def _member_rows(packs: list[list[int]], positions: np.ndarray, entries: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """One ``(pack, slot, position, entry_id, tokens)`` row per member, as an integer array."""
    sizes = np.fromiter((len(p) for p in packs), dtype=np.int64, count=len(packs))
    members = np.fromiter((i for p in packs for i in p), dtype=np.int64, count=int(sizes.sum()))
    pack_numbers = np.repeat(np.arange(len(packs), dtype=np.int64), sizes)
    slots = np.arange(len(members), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.column_stack([pack_numbers, slots, positions[members], entries[positions[members]], lengths[members]])


def remove_plan(connection, name: str) -> bool:
    """Delete plan ``name`` and its members, if it exists."""
    plan_id = connection.execute(select(PackingPlan.id).where(PackingPlan.name == name)).scalar()
    if plan_id is None:
        return False
    connection.execute(delete(PackedEntry).where(PackedEntry.plan_id == plan_id))
    connection.execute(delete(PackingPlan).where(PackingPlan.id == plan_id))
    return True

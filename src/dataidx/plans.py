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
from sqlalchemy import Connection, delete, func, insert, select, text

from . import __version__
from .errors import StaleStoreError, StoreError
from .packing import plan_packs
from .positions import position_entries, spec_lengths
from .render_spec import read_spec
from .sampling import DEFAULT_SEED
from .schema import Pack, PackedEntry, PackingPlan
from .store import rewriting
from .stored import read_mixture
from .storefile import connect_readonly, not_found, read_stamp

# Members travel as one integer each, position << 32 | entry_id, unpacked by SQLite in C.
_MEMBERS = text(
    "INSERT INTO packed_entries (id, plan_id, position, entry_id) "
    "SELECT :first + key, :plan, value >> 32, value & 4294967295 FROM json_each(:members)"
)
# Packs as members << 32 | tokens; each pack's first member is the running sum before it.
_PACKS = text(
    "INSERT INTO packs (plan_id, pack, first_member, members, tokens) "
    "SELECT :plan, :pack + key, :first + sum(value >> 32) OVER (ORDER BY key) - (value >> 32), value >> 32, "
    "value & 4294967295 FROM json_each(:packs)"
)
CHUNK = 1_000_000


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
        stamp = read_stamp(connection)
        stored_spec = read_spec(connection, spec, os.fspath(store))
        stored_mixture = read_mixture(connection, mixture, os.fspath(store))
        pairs = [name for (name,) in connection.execute(
            "SELECT d.name FROM mixture_datasets AS md JOIN datasets AS d ON d.id = md.dataset_id "
            "WHERE md.mixture_id = ? AND md.entries > 0 AND d.converter = 'pair' ORDER BY d.position",
            (stored_mixture.id,))]
        if pairs:
            raise StoreError(f"{store}: mixture '{mixture}' holds preference data ({', '.join(pairs)}): its chosen and "
                             "rejected sides train side by side, so it is batched padded, not packed")
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
    sizes = np.fromiter((len(p) for p in plan.packs), dtype=np.int64, count=len(plan.packs))
    members = np.fromiter((i for p in plan.packs for i in p), dtype=np.int64, count=int(sizes.sum()))
    pack_tokens = np.add.reduceat(lengths[members], np.cumsum(sizes) - sizes) if len(members) else sizes
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
        first = writer.execute(text("SELECT coalesce(max(id), 0) + 1 FROM packed_entries")).scalar()
        packed = (positions[members] << 32) | entries[positions[members]]
        for offset in range(0, len(packed), CHUNK):
            writer.execute(_MEMBERS, {"first": first + offset, "plan": plan_id,
                                      "members": json.dumps(packed[offset : offset + CHUNK].tolist())})
        starts = np.concatenate([[0], np.cumsum(sizes)])
        for offset in range(0, len(sizes), CHUNK):
            chunk = (sizes[offset : offset + CHUNK] << 32) | pack_tokens[offset : offset + CHUNK]
            writer.execute(_PACKS, {"plan": plan_id, "pack": offset, "first": first + int(starts[offset]),
                                    "packs": json.dumps(chunk.tolist())})
        summary.seconds = time.perf_counter() - started
        writer.execute(PackingPlan.__table__.update().where(PackingPlan.id == plan_id).values(seconds=summary.seconds))
    return summary


def remove_plan(connection: Connection, name: str) -> bool:
    """Delete plan ``name`` and its packs and members, if it exists."""
    plan_id = connection.execute(select(PackingPlan.id).where(PackingPlan.name == name)).scalar()
    delete_plans(connection, [] if plan_id is None else [plan_id])
    return plan_id is not None


def delete_plans(connection: Connection, plan_ids: list[int]) -> None:
    """Delete plans with their packs and members (a rowid range each)."""
    for plan_id in plan_ids:
        span = connection.execute(
            select(func.min(Pack.first_member), func.max(Pack.first_member + Pack.members - 1))
            .where(Pack.plan_id == plan_id)
        ).one()
        if span[0] is not None:
            connection.execute(delete(PackedEntry).where(PackedEntry.id.between(*span)))
        connection.execute(delete(Pack).where(Pack.plan_id == plan_id))
        connection.execute(delete(PackingPlan).where(PackingPlan.id == plan_id))


def remove_packing_plan(store: str | os.PathLike[str], name: str) -> None:
    """Delete packing plan ``name`` with its packs and members."""
    with rewriting(store) as connection:
        if not remove_plan(connection, name):
            raise not_found(connection.connection.driver_connection, "packing_plans", "packing plan", name,
                            os.fspath(store))

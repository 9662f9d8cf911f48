"""Writing a packing plan: its row, its packs and their members.

``dataidx pack`` plans; this module is where a plan meets the store's tables. Members and packs
travel as packed integers unpacked by SQLite in C (:mod:`.sqlite.bulk`).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, insert, select, update

from .deletes import delete_plan
from .schema import PackedEntry, PackingPlan
from .sqlite.bulk import insert_pack_members, insert_packs


def save_packing_plan(connection: Connection, plan: dict[str, Any], members: np.ndarray, sizes: np.ndarray,
                      tokens: np.ndarray, started: float) -> float:
    """Store ``plan`` (the ``packing_plans`` columns but times) in place of any plan of its name.

    ``members`` holds every member, pack after pack, as ``position << 32 | entry_id``; ``sizes``
    and ``tokens`` hold each pack's member count and tokens. Returns the seconds since ``started``.
    """
    delete_plan(connection, plan["name"])
    plan_id = connection.execute(insert(PackingPlan).values(
        **plan, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=0.0,
    )).inserted_primary_key[0]
    first = connection.execute(select(func.coalesce(func.max(PackedEntry.id), 0) + 1)).scalar()
    insert_pack_members(connection, plan_id, first, members)
    insert_packs(connection, plan_id, first, sizes, tokens)
    seconds = time.perf_counter() - started
    connection.execute(update(PackingPlan).where(PackingPlan.id == plan_id).values(seconds=seconds))
    return seconds

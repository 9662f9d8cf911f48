"""Removing what a store holds: mixtures, render specs and packing plans, with what depends on them.

``delete_*`` work inside a write transaction (a build or render replacing a spec uses them too);
``remove_*`` are the commands: a whole write of one store, refused with the names there are when
the name is not one of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from sqlalchemy import Connection, delete, func, select

from .handle import missing
from .mixtures.records import Mixtures
from .orders.records import Orders
from .schema import (
    Mixture,
    Pack,
    PackedEntry,
    PackingPlanRow,
    PlanEpoch,
    PlanMerge,
    RenderSpecRow,
)
from .specs.records import Specs
from .specs.token_files import prune_token_files
from .write import rewriting


def delete_plans(connection: Connection, plan_ids: Iterable[int]) -> None:
    """Delete plans with their packs and members (a rowid range each), and the orders read over them."""
    for plan_id in plan_ids:
        name = connection.execute(select(PackingPlanRow.name).where(PackingPlanRow.id == plan_id)).scalar()
        Orders(connection).remove_reading("plan", name or "")
        span = connection.execute(
            select(func.min(Pack.first_member), func.max(Pack.first_member + Pack.members - 1))
            .where(Pack.plan_id == plan_id)
        ).one()
        if span[0] is not None:
            connection.execute(delete(PackedEntry).where(PackedEntry.id.between(*span)))
        connection.execute(delete(Pack).where(Pack.plan_id == plan_id))
        connection.execute(delete(PlanEpoch).where(PlanEpoch.plan_id == plan_id))
        connection.execute(delete(PlanMerge).where(PlanMerge.plan_id == plan_id))
        connection.execute(delete(PackingPlanRow).where(PackingPlanRow.id == plan_id))


def delete_plan(connection: Connection, name: str) -> bool:
    """Delete plan ``name`` and its packs and members, if it exists."""
    plan_id = connection.execute(select(PackingPlanRow.id).where(PackingPlanRow.name == name)).scalar()
    delete_plans(connection, [] if plan_id is None else [plan_id])
    return plan_id is not None


def remove_spec(connection: Connection, name: str) -> int | None:
    """Delete spec ``name``, its lengths, the plans made from them and the orders that read it
    (inside a write); the plans removed, or None when there is no such spec."""
    specs = Specs(connection)
    found = specs.find(name)
    if found is None:
        return None
    plans = connection.execute(select(PackingPlanRow.id).where(PackingPlanRow.spec_id == found["id"])).scalars().all()
    delete_plans(connection, plans)
    Orders(connection).remove_reading("spec", name)
    specs.remove_rows(found["id"])
    return len(plans)


def remove_mixture(store: str | os.PathLike[str], name: str) -> int:
    """Delete mixture ``name`` (every epoch), its positions and its packing plans; returns how many
    entries it had.

    Example::

        remove_mixture("demo.db", "seed7")
    """
    with rewriting(store) as connection:
        found = connection.execute(select(Mixture.id, Mixture.start, Mixture.entries)
                                   .where(Mixture.name == name)).first()
        if found is None:
            raise missing("mixture", name, store=store, names=_names(connection, Mixture))
        delete_plans(connection, connection.execute(
            select(PackingPlanRow.id).where(PackingPlanRow.mixture_id == found.id)).scalars().all())
        Orders(connection).remove_of_mixture(found.id)
        Mixtures(connection).remove_rows(found.id, found.start, found.entries)
        return found.entries


def remove_render_spec(store: str | os.PathLike[str], name: str) -> int:
    """Delete render spec ``name`` and the packing plans made from it; returns plans removed."""
    with rewriting(store) as connection:
        named = Specs(connection).own_token_files(store)
        plans = remove_spec(connection, name)
        if plans is None:
            raise missing("render spec", name, store=store, names=_names(connection, RenderSpecRow))
        kept = Specs(connection).own_token_files(store)
    prune_token_files(store, named, kept)
    return plans


def remove_packing_plan(store: str | os.PathLike[str], name: str) -> None:
    """Delete packing plan ``name`` with its packs and members."""
    with rewriting(store) as connection:
        if not delete_plan(connection, name):
            raise missing("packing plan", name, store=store, names=_names(connection, PackingPlanRow))


def _names(connection: Connection, table: type[Mixture] | type[RenderSpecRow] | type[PackingPlanRow]) -> list[str]:
    return list(connection.execute(select(table.name).order_by(table.id)).scalars())

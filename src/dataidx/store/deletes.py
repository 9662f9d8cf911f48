"""Removing what a store holds: mixtures, render specs and packing plans, with what depends on them.

``delete_*`` work inside a write transaction (a build or render replacing a spec uses them too);
``remove_*`` are the commands: a whole write of one store, refused with the names there are when
the name is not one of them.
"""

from __future__ import annotations

import os

from sqlalchemy import Connection, delete, select

from .handle import missing
from .orders.records import Orders
from .plans.records import Plans
from .schema import (
    AddedTokenUse,
    EntryRender,
    EpochDataset,
    LengthChunk,
    Mixture,
    MixtureDataset,
    MixtureEntry,
    MixtureEpoch,
    MixtureRun,
    MixtureSpan,
    RenderBlock,
    RenderCause,
    RenderSpecRow,
    RenderStatus,
    RepeatCount,
    RepeatRow,
    SpecTokens,
)
from .tokens import own_token_files, prune_token_files
from .write import rewriting


def delete_spec(connection: Connection, name: str) -> int | None:
    """Delete spec ``name``, its lengths and the plans made from them; the plans removed, or None
    when there is no such spec."""
    spec_id = connection.execute(select(RenderSpecRow.id).where(RenderSpecRow.name == name)).scalar()
    if spec_id is None:
        return None
    plans = Plans(connection).remove_of_spec(spec_id)
    Orders(connection).remove_reading("spec", name)
    connection.execute(delete(EntryRender).where(EntryRender.spec_id == spec_id))
    connection.execute(delete(AddedTokenUse).where(AddedTokenUse.spec_id == spec_id))
    connection.execute(delete(RenderCause).where(RenderCause.spec_id == spec_id))
    for summary in (RenderStatus, RenderBlock, LengthChunk):
        connection.execute(delete(summary).where(summary.spec_id == spec_id))
    connection.execute(delete(SpecTokens).where(SpecTokens.spec_id == spec_id))
    connection.execute(delete(RenderSpecRow).where(RenderSpecRow.id == spec_id))
    return plans


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
        Plans(connection).remove_of_mixture(found.id)
        Orders(connection).remove_of_mixture(found.id)
        # Positions are a rowid range, so the delete is a range scan, not a table scan.
        connection.execute(
            delete(MixtureEntry).where(MixtureEntry.id.between(found.start, found.start + found.entries - 1))
        )
        connection.execute(delete(MixtureRun).where(MixtureRun.mixture_id == found.id))
        for summary in (MixtureSpan, RepeatCount, RepeatRow):
            connection.execute(delete(summary).where(summary.mixture_id == found.id))
        connection.execute(delete(MixtureDataset).where(MixtureDataset.mixture_id == found.id))
        connection.execute(delete(EpochDataset).where(EpochDataset.mixture_id == found.id))
        connection.execute(delete(MixtureEpoch).where(MixtureEpoch.mixture_id == found.id))
        connection.execute(delete(Mixture).where(Mixture.id == found.id))
        return found.entries


def remove_render_spec(store: str | os.PathLike[str], name: str) -> int:
    """Delete render spec ``name`` and the packing plans made from it; returns plans removed."""
    with rewriting(store) as connection:
        named = own_token_files(connection, store)
        plans = delete_spec(connection, name)
        if plans is None:
            raise missing("render spec", name, store=store, names=_names(connection, RenderSpecRow))
        kept = own_token_files(connection, store)
    prune_token_files(store, named, kept)
    return plans


def remove_packing_plan(store: str | os.PathLike[str], name: str) -> None:
    """Delete packing plan ``name`` with its packs and members."""
    with rewriting(store) as connection:
        plans = Plans(connection)
        if not plans.remove(name):
            raise plans.missing(name)


def _names(connection: Connection, table: type[Mixture] | type[RenderSpecRow]) -> list[str]:
    return list(connection.execute(select(table.name).order_by(table.id)).scalars())

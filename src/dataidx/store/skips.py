"""Skip-lists: entries a mixture's training orders leave out (``dataidx skip``), with who asked,
why, and what was asked (entries named, or the entries of a run's steps).

A list belongs to a mixture and holds base entries: every position of the mixture (in every
epoch) that holds one is left out of an ``OrderSampler``'s order. Lists are added and removed by
name; they are not part of what a state identifies, so a run resumes across a list added while
it trained (see docs/training-orders.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from sqlalchemy import Connection, delete, insert, select

from ..errors import UsageError
from .connect import reading
from .handle import Store, StoreHandle, missing
from .schema import BaseEntry, Mixture, SkipListRow, SkippedEntry
from .write import rewriting


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


def read_skip_lists(handle: StoreHandle, mixture: str) -> list[StoredSkipList]:
    """The skip lists of ``mixture``, oldest first."""
    return [StoredSkipList(name=name, who=who, why=why, request=request, entries=entries, created_at=created_at)
            for name, who, why, request, entries, created_at in handle.all(_LISTS, mixture)]


def skip_lists_said(store: Store | StoreHandle, mixture: str) -> list[str]:
    """A line per skip list of ``mixture``, as ``compose`` and ``info`` say them."""
    with reading(store) as handle:
        return [f"skip list '{skips.name}': {skips.entries} entries left out of its orders, by {skips.who} "
                f"{skips.created_at}: {skips.why} ({skips.request})" for skips in read_skip_lists(handle, mixture)]


def skipped_entries(handle: StoreHandle, mixture: str) -> np.ndarray:
    """The base entry ids every skip list of ``mixture`` names together, sorted (int64)."""
    return np.asarray([entry_id for entry_id, in handle.all(_SKIPPED, mixture)], dtype=np.int64)


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

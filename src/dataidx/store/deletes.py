"""Removing what a store holds: mixtures, render specs and packing plans, with what depends on
them. Each is a whole write of one store, refused with the names there are when the name is not
one of them; each noun removes its own rows (:class:`.Mixtures`, :class:`.Specs`, :class:`.Plans`,
:class:`.Orders`), and this module says which go together.
"""

from __future__ import annotations

import os

from .mixtures.records import Mixtures
from .orders.records import Orders
from .plans.records import Plans
from .specs.records import Specs
from .specs.token_files import prune_token_files
from .sqlite.working_copy import WorkingCopy
from .write import rewriting


def remove_mixture(store: str | os.PathLike[str], name: str) -> int:
    """Delete mixture ``name`` (every epoch), its positions, its packing plans, skip lists and
    recorded orders; returns how many entries it had.

    Example::

        remove_mixture("demo.db", "seed7")
    """
    with rewriting(store) as connection:
        copy = WorkingCopy(connection)
        found = copy.one("SELECT id, start, entries FROM mixtures WHERE name = {mark}", name)
        if found is None:
            raise copy.missing("mixtures", "mixture", name)
        mixture_id, start, entries = found
        Plans(copy).remove_of_mixture(mixture_id)
        Orders(copy).remove_of_mixture(mixture_id)
        Mixtures(copy).remove_rows(mixture_id, start, entries)
        return entries


def remove_render_spec(store: str | os.PathLike[str], name: str) -> int:
    """Delete render spec ``name`` and the packing plans made from it; returns plans removed."""
    with rewriting(store) as connection:
        specs = Specs(connection)
        named = specs.own_token_files(store)
        plans = specs.remove(name)
        if plans is None:
            raise specs.store.missing("render_specs", "render spec", name)
        kept = specs.own_token_files(store)
    prune_token_files(store, named, kept)
    return plans


def remove_packing_plan(store: str | os.PathLike[str], name: str) -> None:
    """Delete packing plan ``name`` with its packs and members."""
    with rewriting(store) as connection:
        plans = Plans(connection)
        if not plans.remove(name):
            raise plans.missing(name)

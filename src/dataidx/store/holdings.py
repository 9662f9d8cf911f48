"""What a store holds beyond its base index, so that a rebuild never loses it without a word.

A build writes the datasets, their entries and mixture ``default`` (and, with a tokenizer, render
spec ``default``). Mixtures drawn later by ``dataidx mix``, other render specs and packing plans
exist nowhere else: a build over the store would delete them, so it is refused unless asked to.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from ..errors import StoreError, UsageError
from .connect import open_any_revision
from .location import PostgresStore

#: The first schema revision with render specs and packing plans.
_RENDERS_SINCE = "0005"


def held_beyond_build(store: str | os.PathLike[str] | PostgresStore, specs: Collection[str] = ()) -> list[str]:
    """The mixtures, render specs and packing plans of ``store`` that a build writing mixture
    ``default`` and the render ``specs`` would not write again; empty if there is no store.

    Example::

        held_beyond_build("demo.db")   # ["mixture 'seed7'", "packing plan 'default'"]
    """
    try:
        connection, revision = open_any_revision(store)
    except StoreError:
        return []  # no store there (a file that is not one is refused on its own)
    try:
        names = [("mixture", name) for (name,) in connection.execute(
            "SELECT name FROM mixtures WHERE name <> 'default' ORDER BY id")]
        if revision is not None and revision >= _RENDERS_SINCE:
            names += [("render spec", name) for (name,) in connection.execute(
                "SELECT name FROM render_specs ORDER BY id") if name not in specs]
            names += [("packing plan", name) for (name,) in connection.execute(
                "SELECT name FROM packing_plans ORDER BY id")]
    finally:
        connection.close()
    return [f"{kind} '{name}'" for kind, name in names]


def refuse_to_lose(store: str | os.PathLike[str] | PostgresStore, specs: Collection[str] = ()) -> None:
    """A UsageError naming what a build over ``store`` would delete, if anything."""
    held = held_beyond_build(store, specs)
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise UsageError(f"{store} holds {shown}, which a build over it would delete; "
                         "build into another store, or pass --replace to delete them")

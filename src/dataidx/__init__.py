"""dataidx: a persistent SQLite index of LLM fine-tuning datasets, served as a torch Dataset.

The public API. Names are imported on first use, so that ``import dataidx`` (and the CLI) never
pays for torch, datasets or SQLAlchemy; the map below is where each one lives, and the only list
of them (type checkers read the same names under ``TYPE_CHECKING``; tests/test_layers.py keeps
the two equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_face
from ._version import __version__

if TYPE_CHECKING:
    from .convert import register_converter
    from .errors import (
        ConfigError,
        ConversionError,
        DataidxError,
        InvalidRow,
        NotFoundError,
        PluginError,
        ReadOnlyError,
        RenderError,
        SourceError,
        StaleStoreError,
        StoreError,
        UsageError,
    )
    from .index import add_mixture, build
    from .pack import pack_store, plan_packs
    from .read import StoreReader, export_mixture, verify_store
    from .render import render_store
    from .store import (
        composition,
        migrate_store,
        remove_mixture,
        remove_packing_plan,
        remove_render_spec,
        run_query,
        store_info,
    )
    from .training import Collator, DataEngine, PackedDataset, block_causal_mask, loader_state_for_workers

_names, __getattr__, __dir__ = lazy_face(__name__, {
    # training
    "Collator": ".training",
    "DataEngine": ".training",
    "PackedDataset": ".training",
    "block_causal_mask": ".training",
    "loader_state_for_workers": ".training",
    # writing a store
    "build": ".index",
    "add_mixture": ".index",
    "render_store": ".render",
    "pack_store": ".pack",
    "plan_packs": ".pack",
    "migrate_store": ".store",
    "remove_mixture": ".store",
    "remove_packing_plan": ".store",
    "remove_render_spec": ".store",
    # reading and asking a store
    "StoreReader": ".read",
    "export_mixture": ".read",
    "verify_store": ".read",
    "composition": ".store",
    "run_query": ".store",
    "store_info": ".store",
    # plugins
    "register_converter": ".convert",
    # errors: one tree, DataidxError at its root
    "ConfigError": ".errors",
    "ConversionError": ".errors",
    "DataidxError": ".errors",
    "InvalidRow": ".errors",
    "NotFoundError": ".errors",
    "PluginError": ".errors",
    "ReadOnlyError": ".errors",
    "RenderError": ".errors",
    "SourceError": ".errors",
    "StaleStoreError": ".errors",
    "StoreError": ".errors",
    "UsageError": ".errors",
})
__all__ = sorted([*_names, "__version__"])

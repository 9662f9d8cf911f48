"""dataidx: a persistent SQLite index of LLM fine-tuning datasets, served as a torch Dataset.

The public API. Names are imported on first use, so that ``import dataidx`` (and the CLI) never
pays for torch, datasets or SQLAlchemy; the map below is where each one lives, and the only list
of them (type checkers read the same names under ``TYPE_CHECKING``; tests/test_layers.py keeps
the two equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_face

# `name as name` re-exports each name (PEP 484), so a checker reading an installed, py.typed dataidx
# finds it public.
if TYPE_CHECKING:
    from ._version import __version__ as __version__
    from .convert import register_converter as register_converter
    from .errors import ConfigError as ConfigError
    from .errors import ConversionError as ConversionError
    from .errors import DataidxError as DataidxError
    from .errors import ExportError as ExportError
    from .errors import InvalidRow as InvalidRow
    from .errors import MediaError as MediaError
    from .errors import NotFoundError as NotFoundError
    from .errors import PluginError as PluginError
    from .errors import ReadOnlyError as ReadOnlyError
    from .errors import RenderError as RenderError
    from .errors import SourceError as SourceError
    from .errors import StaleStoreError as StaleStoreError
    from .errors import StoreError as StoreError
    from .errors import UsageError as UsageError
    from .index import add_mixture as add_mixture
    from .index import build as build
    from .pack import pack_store as pack_store
    from .pack import plan_packs as plan_packs
    from .read import StoreReader as StoreReader
    from .read import export_mixture as export_mixture
    from .read import verify_store as verify_store
    from .render import RenderRequest as RenderRequest
    from .render import render_store as render_store
    from .sources import Loaded as Loaded
    from .sources import register_source as register_source
    from .store import composition as composition
    from .store import migrate_store as migrate_store
    from .store import remove_mixture as remove_mixture
    from .store import remove_packing_plan as remove_packing_plan
    from .store import remove_render_spec as remove_render_spec
    from .store import run_query as run_query
    from .store import store_info as store_info
    from .training import Collator as Collator
    from .training import DataEngine as DataEngine
    from .training import OrderSampler as OrderSampler
    from .training import PackedDataset as PackedDataset
    from .training import WeightedLoss as WeightedLoss
    from .training import block_causal_mask as block_causal_mask
    from .training import loader_state_for_workers as loader_state_for_workers
    from .training import model_inputs as model_inputs
    from .training import tree_block_mask as tree_block_mask
    from .training import weighted_loss as weighted_loss

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "__version__": "._version",
    # training
    "Collator": ".training",
    "DataEngine": ".training",
    "OrderSampler": ".training",
    "PackedDataset": ".training",
    "WeightedLoss": ".training",
    "block_causal_mask": ".training",
    "loader_state_for_workers": ".training",
    "model_inputs": ".training",
    "tree_block_mask": ".training",
    "weighted_loss": ".training",
    # writing a store
    "build": ".index",
    "add_mixture": ".index",
    "RenderRequest": ".render",
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
    "register_source": ".sources",
    "Loaded": ".sources",
    # errors: one tree, DataidxError at its root
    "ConfigError": ".errors",
    "ConversionError": ".errors",
    "DataidxError": ".errors",
    "InvalidRow": ".errors",
    "NotFoundError": ".errors",
    "PluginError": ".errors",
    "ExportError": ".errors",
    "ReadOnlyError": ".errors",
    "RenderError": ".errors",
    "MediaError": ".errors",
    "SourceError": ".errors",
    "StaleStoreError": ".errors",
    "StoreError": ".errors",
    "UsageError": ".errors",
})

"""dataidx: a persistent SQLite index of LLM fine-tuning datasets, served as a torch Dataset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ConfigError,
    ConversionError,
    DataidxError,
    PluginError,
    ReadOnlyError,
    RenderError,
    SourceError,
    StaleStoreError,
    StoreError,
)

if TYPE_CHECKING:
    from .build import build
    from .collate import Collator
    from .converters import register_converter
    from .engine import DataEngine, PackedDataset
    from .lengths import render_store
    from .packing import plan_packs
    from .plans import pack_store
    from .reader import StoreReader

__all__ = [
    "Collator",
    "ConfigError",
    "ConversionError",
    "DataEngine",
    "DataidxError",
    "PackedDataset",
    "PluginError",
    "ReadOnlyError",
    "RenderError",
    "SourceError",
    "StaleStoreError",
    "StoreError",
    "StoreReader",
    "__version__",
    "build",
    "pack_store",
    "plan_packs",
    "register_converter",
    "render_store",
]

# Resolved on first use so that `import dataidx` (and the CLI) never pays for torch or datasets.
_LAZY = {
    "Collator": ".collate",
    "DataEngine": ".engine",
    "PackedDataset": ".engine",
    "pack_store": ".plans",
    "render_store": ".lengths",
    "StoreReader": ".reader",
    "build": ".build",
    "plan_packs": ".packing",
    "register_converter": ".converters",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dataidx' has no attribute {name!r}")

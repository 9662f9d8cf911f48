"""A mixture's entries -> samples, without torch: readers, training orders, verifying a store
against its sources, and exporting a mixture."""

from ..sources import paused_gc
from .export import export_mixture, to_hf
from .holding import row_entries
from .order import SkippingOrder, TrainingOrder, epoch_steps, step_items
from .reader import EntryReader, StoreReader
from .rows import open_rows
from .verify import dataset_problems, verify_store

__all__ = [
    "EntryReader",
    "SkippingOrder",
    "StoreReader",
    "TrainingOrder",
    "epoch_steps",
    "dataset_problems",
    "export_mixture",
    "open_rows",
    "paused_gc",
    "row_entries",
    "step_items",
    "to_hf",
    "verify_store",
]

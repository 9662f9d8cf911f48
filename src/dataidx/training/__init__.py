"""The torch side, and the only package that imports torch: Datasets over a store, and the
collator that pads entries or lays packs out for varlen attention."""

from .collate import Collator, block_causal_mask
from .engine import DataEngine, PackedDataset

__all__ = ["Collator", "DataEngine", "PackedDataset", "block_causal_mask"]

"""The torch side, and the only package that imports torch: Datasets over a store, the collator
that pads entries or lays packs out for varlen attention (or, for prefix trees, a tree mask), and
resuming a stateful loader."""

from .collate import Collator, block_causal_mask
from .engine import DataEngine, PackedDataset
from .resume import loader_state_for_workers
from .sampler import OrderSampler
from .tree_mask import tree_block_mask

__all__ = ["Collator", "DataEngine", "OrderSampler", "PackedDataset", "block_causal_mask",
           "loader_state_for_workers", "tree_block_mask"]

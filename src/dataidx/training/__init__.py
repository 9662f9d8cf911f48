"""The torch side, and the only package that imports torch: Datasets over a store, the collator
that pads entries or lays packs out for varlen attention (or, for prefix trees, a tree mask),
LLaMA-Factory v1's weighted loss, and resuming a stateful loader."""

from .collate import Collator
from .engine import DataEngine, PackedDataset
from .loss import WeightedLoss, model_inputs, weighted_loss
from .masks import block_causal_mask
from .resume import loader_state_for_workers
from .sampler import OrderSampler
from .tree_mask import tree_block_mask

__all__ = ["Collator", "DataEngine", "OrderSampler", "PackedDataset", "WeightedLoss", "block_causal_mask",
           "loader_state_for_workers", "model_inputs", "tree_block_mask", "weighted_loss"]

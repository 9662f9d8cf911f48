"""Qwen2-VL's 3-D rotary positions (M-RoPE) per sample, so packs of multimodal samples keep each
sample's own positions, images and attention: padding-free batches LLaMA-Factory v1 refuses
(the :class:`~.collate.Collator` lays them out, :mod:`.media_batch`).

A Qwen2-VL text token sits at ``(p, p, p)``; an image's merged patches at ``(s + t, s + h, s + w)``
from the position ``s`` where the image starts, and the text after it resumes at
``s + max(h, w)`` (transformers 5.24, ``Qwen2VLModel.get_rope_index`` and
``get_vision_position_ids`` in models/qwen2_vl/modeling_qwen2_vl.py). The model computes them
itself only for a whole row, so a pack must bring its own, each sample's restarting at 0.

What keeps a pack's samples apart in transformers 5.24 (``Qwen2VLTextModel.forward``): a
``position_ids`` of shape ``(4, batch, length)`` is read as text positions (row 0) then the three
M-RoPE rows. Row 0 is what ``masking_utils.create_causal_mask`` reads, when no ``attention_mask``
is given, to find packed samples (``find_packed_sequence_indices``: a new sample wherever a
position is not its predecessor's plus one) and build a block-causal mask for eager, SDPA and
flex attention; flash attention gets it as ``position_ids``, varlen segments starting at each 0
of a one-row batch (modeling_flash_attention_utils.py, ``_is_packed_sequence``; read, not run
here). The mask looks for samples only without a cache (``_preprocess_mask_arguments``), and the
model makes one whenever ``use_cache`` is on, as its config has it even in training: a pack given
without a mask needs ``use_cache=False``. A ``(3, batch, length)`` tensor has no text row:
without a mask every sample attends to the ones before it. A 4-D ``attention_mask`` is used as
given (``_preprocess_mask_arguments``), so :func:`~.masks.block_causal_mask` keeps samples apart
too (what :func:`~.loss.model_inputs` gives a packed batch): additive for eager attention, which
adds a boolean mask to its scores as 0 and 1.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import ArrayLike


def mrope_positions(input_ids: ArrayLike, image_grid_thw: ArrayLike, image_token_id: int,
                    spatial_merge_size: int = 2) -> torch.Tensor:
    """One sample's ``(3, length)`` M-RoPE positions from 0, as ``get_rope_index`` gives them for
    that sample alone: computed from the ids and grids, so a pack needs no model to position its
    samples. Each image is the next ``t * h * w / merge**2`` image tokens, its grid's row in order
    (no vision start id: transformers 5.24 finds images by their tokens, ``mm_token_type_ids``)."""
    ids = np.asarray(input_ids, dtype=np.int64).reshape(-1)
    grids = np.asarray(image_grid_thw, dtype=np.int64).reshape(-1, 3)
    t, h, w = grids[:, 0], grids[:, 1] // spatial_merge_size, grids[:, 2] // spatial_merge_size
    sizes = t * h * w  # image tokens of each image
    where = np.flatnonzero(ids == image_token_id)
    firsts = np.cumsum(sizes) - sizes  # each image's first among the image tokens
    if where.size != sizes.sum() or np.any(where[firsts + sizes - 1] - where[firsts] != sizes - 1):
        raise ValueError(f"{where.size} image tokens (id {image_token_id}) are not one run per grid of "
                         f"{grids.tolist()} (spatial_merge_size {spatial_merge_size})")
    steps = (ids != image_token_id).astype(np.int64)  # a text token moves the next position on by 1
    steps[where[firsts + sizes - 1]] = np.maximum(h, w)  # an image by max(h, w), at its last token
    starts = np.cumsum(steps) - steps  # each token's start position: all steps before it
    positions = np.repeat(starts[None], 3, axis=0)
    image = np.repeat(np.arange(len(sizes)), sizes)  # which image each image token is of
    within = np.arange(where.size) - np.repeat(firsts, sizes)  # its place in its image
    hw, width = (h * w)[image], w[image]
    positions[:, where] += np.stack([within // hw, within % hw // width, within % width])
    return torch.from_numpy(positions)

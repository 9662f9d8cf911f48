"""Qwen2-VL's 3-D rotary positions (M-RoPE) per sample, and packs of multimodal samples that keep
each sample's own positions, images and attention: padding-free batches LLaMA-Factory v1 refuses.

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
model makes one whenever ``use_cache`` is on, as its config has it even in training: a pack says
``use_cache=False``. A
``(3, batch, length)`` tensor has no text row: without a mask every sample attends to the ones
before it. A 4-D ``attention_mask`` is used as given (``_preprocess_mask_arguments``), so
:func:`~.collate.block_causal_mask` keeps samples apart too: additive for eager attention, which
adds a boolean mask to its scores as 0 and 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from ..render import IGNORE
from .collate import block_causal_mask


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


def pack_media(samples: Sequence[Mapping[str, Any]], image_token_id: int, spatial_merge_size: int = 2,
               mask_dtype: torch.dtype | None = None) -> dict[str, Any]:
    """One packed row of Qwen2-VL samples (``input_ids``, ``labels``, and ``pixel_values`` with
    ``image_grid_thw`` where they have images) for its ``forward``: ids, labels and token types
    end to end, pixels and grids in the same order (the vision tower encodes each image on its
    own, by its grid), ``position_ids`` ``(4, 1, length)``: text positions, then M-RoPE's three
    rows, each sample's from 0. Without ``attention_mask`` transformers builds the block-causal
    mask from the text row (``use_cache=False``: a cache turns that off); with ``mask_dtype`` (the
    model's) the pack carries it, 4-D and additive. ``labels`` and ``sample_ids`` are not the
    model's inputs. A later sample's first label is unlabelled: it would be predicted from the
    sample before."""
    ids = [torch.as_tensor(sample["input_ids"], dtype=torch.long).reshape(-1) for sample in samples]
    grids = [_grid(sample) for sample in samples]
    sample_ids = torch.cat([torch.full((len(row),), number) for number, row in enumerate(ids, 1)])[None]
    pack: dict[str, Any] = {
        "input_ids": torch.cat(ids)[None], "labels": _labels(samples), "sample_ids": sample_ids,
        "position_ids": _positions(ids, grids, image_token_id, spatial_merge_size), "use_cache": False,
        "mm_token_type_ids": torch.cat([_token_types(sample, row, image_token_id)
                                        for sample, row in zip(samples, ids)])[None]}
    if any(len(grid) for grid in grids):
        pack["pixel_values"] = torch.cat([sample["pixel_values"] for sample in samples if "pixel_values" in sample])
        pack["image_grid_thw"] = torch.cat(grids)
    if mask_dtype is not None:
        pack["attention_mask"] = block_causal_mask(sample_ids, mask_dtype)
    return pack


def _labels(samples: Sequence[Mapping[str, Any]]) -> torch.Tensor:
    """``(1, length)`` labels end to end, each later sample's first unlabelled."""
    labels = [torch.as_tensor(sample["labels"], dtype=torch.long).reshape(-1).clone() for sample in samples]
    for later in labels[1:]:
        later[:1] = IGNORE
    return torch.cat(labels)[None]


def _positions(ids: Sequence[torch.Tensor], grids: Sequence[torch.Tensor], image_token_id: int,
               spatial_merge_size: int) -> torch.Tensor:
    """``(4, 1, length)``: each sample's text positions 0, 1, 2, ... (the row transformers finds
    samples in), over its M-RoPE rows (:func:`mrope_positions`), samples end to end."""
    text = torch.cat([torch.arange(len(row)) for row in ids])[None]
    rope = torch.cat([mrope_positions(row, grid, image_token_id, spatial_merge_size)
                      for row, grid in zip(ids, grids)], dim=1)
    return torch.cat([text, rope])[:, None]


def _grid(sample: Mapping[str, Any]) -> torch.Tensor:
    """A sample's ``(images, 3)`` grids: none for a text-only sample."""
    return torch.as_tensor(sample.get("image_grid_thw", []), dtype=torch.long).reshape(-1, 3)


def _token_types(sample: Mapping[str, Any], ids: torch.Tensor, image_token_id: int) -> torch.Tensor:
    """A sample's ``mm_token_type_ids`` (0 text, 1 image), the processor's or read off its ids."""
    if "mm_token_type_ids" in sample:
        return torch.as_tensor(sample["mm_token_type_ids"], dtype=torch.long).reshape(-1)
    return (ids == image_token_id).long()

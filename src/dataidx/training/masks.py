"""Attention masks that keep a packed row's samples apart, for attention implementations that
take a mask rather than varlen segments: boolean for SDPA (and the reference for FlexAttention),
additive for eager attention, which adds the mask to its scores."""

from __future__ import annotations

import torch

from ..errors import UsageError


def block_causal_mask(sample_ids: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``[batch, 1, length, length]`` booleans: token ``q`` may attend to ``k`` only when both
    belong to the same sample (ids above 0) and ``k <= q``. Padding attends to nothing. With
    ``dtype`` (the model's), the additive mask eager attention needs instead (see :func:`additive`)."""
    same = sample_ids[:, :, None] == sample_ids[:, None, :]
    real = (sample_ids > 0)[:, :, None]
    causal = torch.ones(sample_ids.shape[1], sample_ids.shape[1], dtype=torch.bool).tril()
    mask = (same & real & causal)[:, None]
    return mask if dtype is None else additive(mask, dtype)


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask as eager attention takes one, added to its scores: 0 where a token
    may attend, ``dtype``'s minimum elsewhere (a boolean mask added there would mask nothing)."""
    if not dtype.is_floating_point:
        raise UsageError(f"an additive attention mask needs a floating dtype (the model's), got {dtype}")
    return torch.zeros(mask.shape, dtype=dtype).masked_fill_(~mask, torch.finfo(dtype).min)

"""Attention masks for packs of prefix trees (``dataidx pack --merge-cuts --trees``).

A tree sample's ``segments`` are ``[first token, tokens, parent]`` in token order (see
``dataidx.pack.sequences``). In a batch every row numbers its segments from 1 (0 is padding), a
sample without segments being one segment, and ``segment_ancestors[b, i, j]`` says segment ``j``
is segment ``i`` or one of its ancestors in row ``b``. Token ``q`` attends to token ``k`` when
``segment_ancestors[b, seg[q], seg[k]]`` and ``k <= q``: causal within a segment, the whole of
each ancestor before it, nothing of a sibling branch or of another sample. Padding attends to
padding only, so no row of the mask is empty (an empty row makes SDPA's softmax NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def tree_segments(packs: list[list[dict[str, Any]]]) -> tuple[np.ndarray, torch.Tensor]:
    """Every token's segment id (rows end to end, numbered per row from 1) and the
    ``[batch, segments + 1, segments + 1]`` ancestor-or-self table."""
    per_row: list[list[int]] = []  # per row, the parent of each segment (0: a root)
    ids: list[np.ndarray] = []
    for pack in packs:
        parents = [0]  # segment 0, padding: its own
        for sample in pack:
            base = len(parents)
            segments = sample.get("segments") or [[0, len(sample["input_ids"]), -1]]
            counts = np.array([count for _, count, _ in segments], dtype=np.int64)
            if int(counts.sum()) != len(sample["input_ids"]):
                raise ValueError(f"a tree's segments cover {int(counts.sum())} of its "
                                 f"{len(sample['input_ids'])} tokens")
            ids.append(np.repeat(np.arange(base, base + len(segments)), counts))
            parents += [base + parent if parent >= 0 else 0 for _, _, parent in segments]
        per_row.append(parents)
    width = max(map(len, per_row), default=1)
    ancestors = np.zeros((len(packs), width, width), dtype=bool)
    for row, parents in enumerate(per_row):
        ancestors[row, 0, 0] = True
        for segment in range(1, len(parents)):
            at = segment
            while at:  # a segment's parents come before it: each chain is short and ends at a root
                ancestors[row, segment, at] = True
                at = parents[at]
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return flat, torch.from_numpy(ancestors)


def tree_attention_mask(segment_ids: torch.Tensor, ancestors: torch.Tensor) -> torch.Tensor:
    """``[batch, 1, width, width]`` booleans, True where a query token may attend to a key token."""
    batch, width = segment_ids.shape
    segments = ancestors.shape[1]
    rows = ancestors.gather(1, segment_ids[:, :, None].expand(batch, width, segments))  # [b, q, segment of k?]
    allowed = rows.gather(2, segment_ids[:, None, :].expand(batch, width, width))
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    return (allowed & causal)[:, None]


def tree_block_mask(batch: dict[str, Any], block_size: int = 128) -> Any:
    """A FlexAttention ``BlockMask`` of the same rule, for ``attn_implementation="flex_attention"``
    (pass it as the batch's ``attention_mask``): blocks no token of which may attend are skipped.

    Example::

        batch["attention_mask"] = tree_block_mask(batch)
    """
    from torch.nn.attention.flex_attention import create_block_mask  # here: FlexAttention loads compile machinery

    segment_ids, ancestors = batch["segment_ids"], batch["segment_ancestors"]
    rows, width = segment_ids.shape

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return ancestors[b, segment_ids[b, q], segment_ids[b, k]] & (k <= q)

    return create_block_mask(mask_mod, rows, None, width, width, device=segment_ids.device, BLOCK_SIZE=block_size)

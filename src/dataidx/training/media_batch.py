"""Media features in a batch, as LLaMA-Factory v1's collation batches them
(``core/utils/batching.py``, ff6d4d12): ``pixel_values`` and grids are ragged (a patch count per
image), so they are concatenated along dim 0 in sample order, never padded; ``mm_token_type_ids``
is padded with 0 like the other token columns.

v1 also appends a *dummy media fragment* (one small image's placeholder tokens, zero loss) to a
micro batch that holds no image while another rank's does, so every rank runs the vision tower
(FSDP-sharded towers hang otherwise). It learns that by an all-reduce per step; a
``Collator(dummy_media=...)`` needs none: it appends the fragment to every batch without images,
the same rule on every rank, at the cost of one 56x56 image's tower call on text-only steps.
"""

from __future__ import annotations

from typing import Any

import torch

from ..render import IGNORE
from .media_rope import mrope_positions

#: The features a processor gives per sample that are concatenated, not padded (v1's
#: ``_MULTIMODAL_PASSTHROUGH_KEYS``, core/utils/collation.py).
MEDIA_FEATURES = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts",
                  "video_second_per_grid", "input_features", "feature_attention_mask")


def presence_key(fragment: dict[str, Any]) -> str:
    """The feature whose presence says a batch runs the fragment's tower (v1's ``_ALIGN_MODALITIES``:
    ``pixel_values`` for images, ``input_features`` for audio)."""
    return next(key for key in MEDIA_FEATURES if key in fragment)


def concatenated_features(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Each media feature of ``samples`` that any has, concatenated along dim 0 in sample order."""
    found: dict[str, torch.Tensor] = {}
    for key in MEDIA_FEATURES:
        parts = [sample[key] for sample in samples if key in sample]
        if parts:
            found[key] = torch.cat(parts, dim=0)
    return found


def has_media_tokens(samples: list[dict[str, Any]]) -> bool:
    return any("mm_token_type_ids" in sample for sample in samples)


def mm_types(sample: dict[str, Any]) -> list[int]:
    """A sample's ``mm_token_type_ids`` (0 on every token of one without media)."""
    return sample.get("mm_token_type_ids") or [0] * len(sample["input_ids"])


def dummy_sample(fragment: dict[str, Any]) -> dict[str, Any]:
    """v1's dummy fragment as a sample of a pack: its tokens unlabelled, weighted 0."""
    size = len(fragment["input_ids"])
    return {**fragment, "labels": [IGNORE] * size, "loss_weights": [0.0] * size}


def with_mrope(batch: dict[str, Any], rows: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """A batch holding images (``image_grid_thw``, Qwen2-VL's) with ``position_ids`` of shape
    ``(4, rows, width)``: the text positions it has, then each sample's three M-RoPE rows from 0
    (:func:`.media_rope.mrope_positions`; ``rows`` are each row's samples, end to end). That is
    what Qwen2-VL's ``forward`` reads as given positions (transformers 5.24, module docstring of
    :mod:`.media_rope`), so a pack's samples keep their own and a padded row's are the model's.
    A sample's image tokens are found by its ``mm_token_type_ids``, and its merge size by its
    grids' patches per token, as v1's collation finds it (``_align_grid_media``): no setting."""
    if "image_grid_thw" not in batch:
        return batch
    text = batch["position_ids"]
    rope = torch.zeros((3, *text.shape), dtype=text.dtype)
    for number, row in enumerate(rows):
        start = 0
        for sample in row:
            size, types = len(sample["input_ids"]), mm_types(sample)
            grids = torch.as_tensor(sample.get("image_grid_thw", []), dtype=torch.long).reshape(-1, 3)
            tokens = sum(1 for kind in types if kind == 1)
            merge = round((int(grids.prod(dim=1).sum()) // tokens) ** 0.5) if tokens else 2
            rope[:, number, start:start + size] = mrope_positions(types, grids, 1, merge)
            start += size
    batch["position_ids"] = torch.cat([text[None], rope])
    return batch


def with_dummy_columns(batch: dict[str, Any], fragment: dict[str, Any], samples: list[dict[str, Any]]
                       ) -> dict[str, Any]:
    """v1's ``_inject_dummy_into_collated`` on the padded batch of ``samples``: the fragment's
    tokens appended as extra columns of row 0 (other rows padded there), attended, unlabelled,
    weight 0; its positions continue row 0's (M-RoPE's too); its features become the batch's."""
    rows, width = batch["input_ids"].shape
    ids = torch.tensor(fragment["input_ids"], dtype=batch["input_ids"].dtype)
    size = len(ids)

    def grown(tensor: torch.Tensor, fill: float, tail: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.full((rows, width + size), fill, dtype=tensor.dtype)
        out[:, :width] = tensor
        if tail is not None:
            out[0, width:] = tail.to(tensor.dtype)
        return out

    batch["input_ids"] = grown(batch["input_ids"], 0, ids)
    batch["attention_mask"] = grown(batch["attention_mask"], 0, torch.ones(size))
    batch["labels"] = grown(batch["labels"], IGNORE)
    batch["loss_weights"] = grown(batch["loss_weights"], 0.0)
    batch["position_ids"] = grown(batch["position_ids"], 0, torch.arange(width, width + size))
    types = torch.tensor(fragment["mm_token_type_ids"])
    batch["mm_token_type_ids"] = grown(batch.get("mm_token_type_ids", torch.zeros((rows, width), dtype=torch.long)),
                                       0, types)
    batch.update({key: fragment[key] for key in MEDIA_FEATURES if key in fragment})
    first = {"input_ids": [*samples[0]["input_ids"], *fragment["input_ids"]],
             "mm_token_type_ids": [*mm_types(samples[0]), *fragment["mm_token_type_ids"]],
             **({"image_grid_thw": fragment["image_grid_thw"]} if "image_grid_thw" in fragment else {})}
    return with_mrope(batch, [[first], *([sample] for sample in samples[1:])])

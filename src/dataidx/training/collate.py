"""Collate rendered entries into padded batches, or packs into packed rows for varlen attention.

Padding is decided by length, never by comparing token ids (a pad id equal to EOS would
otherwise unlabel every supervised end-of-turn). A packed row concatenates its samples with
``position_ids`` restarting at 0, the first label of every sample after the first set to -100
(that token would be predicted from the previous sample), ``cu_seq_lens`` and ``max_length``
(over the flattened ``[batch * width]`` layout, each row's padding a segment of its own) for
flash-attention's varlen kernels, and ``sample_ids`` from which :func:`.masks.block_causal_mask`
builds the mask for attention implementations that take one: no sample attends to another.

A pack of a tree plan (``dataidx pack --merge-cuts --trees``) holds prefix trees, which varlen
kernels cannot express: its batch has no ``cu_seq_lens``; ``attention_mask`` is the dense
``[batch, 1, width, width]`` boolean mask (transformers uses a 4-D mask as given), and
``segment_ids`` with ``segment_ancestors`` build a FlexAttention block mask
(:func:`dataidx.tree_block_mask`).
"""

from __future__ import annotations

import logging
from itertools import chain
from typing import Any

import numpy as np
import torch

from ..errors import UsageError
from ..render import IGNORE
from .masks import additive
from .media_batch import (
    concatenated_features,
    dummy_sample,
    has_media_tokens,
    mm_types,
    presence_key,
    with_dummy_columns,
    with_mrope,
)
from .tree_mask import tree_attention_mask, tree_segments

logger = logging.getLogger(__name__)
#: Whether this process has said that a batch's weights would be dropped (said once: a run's
#: batches all come from the same data).
_said_unweighted = False
#: How a batch of preference pairs is laid out (``Collator(pairs=...)``).
PAIR_LAYOUTS = ("stacked", "concatenated")
#: How a pack of a plan is laid out: one row of its samples end to end, or a padded row each.
PACK_LAYOUTS = ("packed", "rows")


def _weights(sample: dict[str, Any]) -> list[float]:
    """A sample's loss weights; their absence is said, never guessed (a weight of 0.5 in the data
    would silently train as 1)."""
    try:
        return sample["loss_weights"]
    except KeyError:
        raise UsageError(
            f"a sample reached the collator without loss_weights (it has {', '.join(sorted(sample)) or 'no keys'}): "
            "transformers.Trainer drops every column its model's forward does not take unless "
            "TrainingArguments(remove_unused_columns=False)") from None


class Collator:
    """``collate_fn`` for ``DataEngine(render=...)`` (padded) and ``PackedDataset`` (packed).

    With ``packs="rows"`` a pack's samples are padded rows instead (a plan made with
    ``--strategy dynamic``: v1's ``dynamic_batching`` micro-batches, ``DataLoader(batch_size=1)``).

    Preference entries become one padded batch of every chosen side followed by every rejected
    side (``2 * batch`` rows), as pairwise trainers expect; with ``pairs="concatenated"``, one row
    a pair, chosen then rejected, as LLaMA-Factory v1's DPO and RM trainers take them
    (:meth:`concatenated`).

    Entries with media (a processor's spec) bring ``pixel_values``, ``image_grid_thw`` and
    ``mm_token_type_ids``: the features are concatenated in sample order, the types padded with 0,
    as v1 batches them (:mod:`.media_batch`); ``dummy_media`` (``RenderedMixture.dummy_media_fragment()``)
    is v1's fragment, appended to every batch without images so every rank runs the vision tower.

    A batch holding prefix trees carries a 4-D ``attention_mask``: booleans by default (SDPA,
    and the reference for FlexAttention's block mask); with ``tree_mask_dtype`` a floating dtype,
    the additive mask eager attention needs (0 where a token may attend, the dtype's minimum
    elsewhere), since eager attention adds the mask to its scores.

    A model's own loss reads ``labels`` only, so a supervised token weighted other than 1 would
    train at 1: the first such batch of a process says so, unless ``weighted`` says the loss reads
    ``loss_weights`` (:func:`~dataidx.training.weighted_loss` does; :class:`WeightedLoss` sets it).

    Example::

        loader = DataLoader(PackedDataset("demo.db"), batch_size=2, collate_fn=Collator(pad_token_id=0))
    """

    def __init__(self, pad_token_id: int, *, tree_mask_dtype: torch.dtype | None = None,
                 weighted: bool = False, pairs: str = "stacked", dummy_media: dict[str, Any] | None = None,
                 packs: str = "packed") -> None:
        if tree_mask_dtype is not None and not tree_mask_dtype.is_floating_point:
            raise UsageError(f"tree_mask_dtype must be a floating dtype (the model's), got {tree_mask_dtype}")
        if pairs not in PAIR_LAYOUTS:
            raise UsageError(f"pairs must be one of {', '.join(map(repr, PAIR_LAYOUTS))}, got {pairs!r}: 'stacked' "
                             "gives every chosen side then every rejected side (2 * batch rows), 'concatenated' "
                             "one row a pair, chosen then rejected (LLaMA-Factory v1's DPO input)")
        if packs not in PACK_LAYOUTS:
            raise UsageError(f"packs must be one of {', '.join(map(repr, PACK_LAYOUTS))}, got {packs!r}: 'packed' lays "
                             "a pack out as one row, 'rows' its samples as padded rows (a plan made with --strategy "
                             "dynamic: LLaMA-Factory v1's padded micro-batches)")
        self.pad_token_id = pad_token_id
        self.packs = packs
        self.pairs = pairs
        self.tree_mask_dtype = tree_mask_dtype
        self.weighted = weighted
        self.dummy_media = dummy_media
        #: what marks a batch as running the dummy's tower (``pixel_values``, ``input_features``)
        self._dummy_key = presence_key(dummy_media) if dummy_media is not None else None

    def __call__(self, batch: list[Any]) -> dict[str, Any]:
        if batch and isinstance(batch[0], list) and self.packs == "rows":
            return self([sample for pack in batch for sample in pack])  # a micro-batch's samples, padded
        if batch and isinstance(batch[0], list):
            if self.dummy_media is not None and not any(self._dummy_key in sample for pack in batch for sample in pack):
                batch = [[*batch[0], dummy_sample(self.dummy_media)], *batch[1:]]  # v1's fragment, in pack 0
            return _with_extra_info(self.packed(batch), [[sample.get("extra_info") for sample in pack]
                                                         for pack in batch])
        infos = [item.get("extra_info") for item in batch]
        if not _pair_batch(batch):
            padded = self.padded(batch)
            if self.dummy_media is not None and self._dummy_key not in padded:
                padded = with_dummy_columns(padded, self.dummy_media, batch)
            return _with_extra_info(padded, infos)
        if self.pairs == "concatenated":
            return _with_extra_info(self.concatenated(batch), infos)
        return _with_extra_info(self.padded([item["chosen"] for item in batch] + [item["rejected"] for item in batch]),
                                infos + infos)

    def concatenated(self, pairs: list[dict[str, Any]]) -> dict[str, Any]:
        """One row per preference pair, as LLaMA-Factory v1's ``Renderer.process_samples`` lays a
        pair out: chosen then rejected, ``token_type_ids`` 1 on chosen tokens, 2 on rejected, 0 on
        padding; ``position_ids`` restarting at 0 on each side (v1 stores them from 1, and its DPO
        and RM trainers feed the model ``0..`` per side, recomputed from ``token_type_ids``).

        A row is a pack of its two sides, so it has what a packed row has (``sample_ids`` equal to
        ``token_type_ids``, ``cu_seq_lens``, ``max_length``: the sides kept apart by varlen kernels
        or :func:`block_causal_mask`), and the rejected side's first label is -100 as a pack's
        later sample's is: it would be predicted from the chosen side's last token (v1 keeps it;
        it is a prompt token, unlabelled anyway, whenever the rejected side has a prompt)."""
        batch = self.packed([[pair["chosen"], pair["rejected"]] for pair in pairs])
        batch["token_type_ids"] = batch["sample_ids"].clone()
        return batch

    def padded(self, samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """One row per sample, right-padded to the longest."""
        real = _real([_length(sample, number) for number, sample in enumerate(samples)])
        batch = self._columns(real, samples)
        batch["position_ids"] = torch.from_numpy(np.where(real, np.arange(real.shape[1]), 0))
        batch["attention_mask"] = torch.from_numpy(real.astype(np.int64))
        return with_mrope(_with_media(batch, real, samples), [[sample] for sample in samples])

    def packed(self, packs: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """One row per pack: its samples end to end, each restarting its positions."""
        samples = [sample for pack in packs for sample in pack]  # rows end to end
        if any("input_ids" not in sample for sample in samples):
            raise ValueError("preference entries (chosen/rejected) cannot be packed; batch them padded")
        sizes = np.array([_length(sample, number) for number, sample in enumerate(samples)], dtype=np.int64)
        numbers = np.array([number for pack in packs for number in range(1, len(pack) + 1)], dtype=np.int64)
        starts = np.cumsum(sizes) - sizes  # each sample's first token among all rows' tokens
        firsts = np.cumsum([0, *map(len, packs)]).tolist()  # each row's first sample
        row_lengths = [int(sizes[a:b].sum()) for a, b in zip(firsts, firsts[1:])]
        real = _real(row_lengths)
        # A row's later samples lose their first label: it would be predicted from the sample before.
        batch: dict[str, Any] = self._columns(real, samples, unlabelled=starts[(numbers > 1) & (sizes > 0)])
        batch["position_ids"] = _filled(real, _positions(samples, sizes, starts), 0)
        batch["sample_ids"] = _filled(real, np.repeat(numbers, sizes), 0)
        with_mrope(_with_media(batch, real, samples), packs)
        if any("segments" in sample for sample in samples):  # prefix trees: a mask, not segments of a row
            segment_ids, ancestors = tree_segments(packs)
            batch["segment_ids"], batch["segment_ancestors"] = _filled(real, segment_ids, 0), ancestors
            mask = tree_attention_mask(batch["segment_ids"], ancestors)
            batch["attention_mask"] = mask if self.tree_mask_dtype is None else additive(mask, self.tree_mask_dtype)
            return batch
        batch["attention_mask"] = (batch["sample_ids"] > 0).long()
        # Segments of the flattened [batch * width] layout: each sample, then each row's padding
        # as a segment of its own, so every segment lies inside one row and one sample.
        width = real.shape[1]
        segments: list[int] = []
        for a, b, used in zip(firsts, firsts[1:], row_lengths):
            segments += [n for n in sizes[a:b].tolist() if n]
            if width - used:
                segments.append(width - used)
        batch["cu_seq_lens"] = torch.from_numpy(np.cumsum([0, *segments]).astype(np.int32))
        batch["max_length"] = max(segments, default=0)  # an int
        return batch

    def _columns(self, real: np.ndarray, samples: list[dict[str, Any]],
                 unlabelled: np.ndarray | None = None) -> dict[str, torch.Tensor]:
        """``input_ids``, ``labels`` and ``loss_weights`` of samples laid end to end into the ``real``
        cells of a padded batch; tokens at ``unlabelled`` (among all samples' tokens) train on nothing."""
        ids = np.array(list(chain.from_iterable(sample["input_ids"] for sample in samples)), dtype=np.int64)
        labels = np.array(list(chain.from_iterable(sample["labels"] for sample in samples)), dtype=np.int64)
        weights = np.array(list(chain.from_iterable(_weights(sample) for sample in samples)), dtype=np.float32)
        if unlabelled is not None:
            labels[unlabelled], weights[unlabelled] = IGNORE, 0.0
        if not (self.weighted or _said_unweighted):
            _say_unweighted(labels, weights)
        return {"input_ids": _filled(real, ids, self.pad_token_id), "labels": _filled(real, labels, IGNORE),
                "loss_weights": _filled(real, weights, 0.0)}


def _with_media(batch: dict[str, Any], real: np.ndarray, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """``batch`` with its samples' media (:mod:`.media_batch`): ``mm_token_type_ids`` laid out as
    the ids are, 0 on padding, and features concatenated in sample order."""
    if has_media_tokens(samples):
        types = np.array(list(chain.from_iterable(mm_types(sample) for sample in samples)), dtype=np.int64)
        batch["mm_token_type_ids"] = _filled(real, types, 0)
    batch.update(concatenated_features(samples))
    return batch


def _with_extra_info(batch: dict[str, Any], infos: list[Any]) -> dict[str, Any]:
    """``batch`` with ``extra_info``, one per row (a packed row's: one per sample, in ``sample_ids``
    order), when any sample has one: v1's ``extra_info`` (a KTO label, say) reaches the loss as a
    list beside the tensors, None where a sample has none. A model never sees it
    (:func:`~dataidx.training.model_inputs` leaves it out)."""
    rows = (row if isinstance(row, list) else [row] for row in infos)
    if any(info is not None for row in rows for info in row):
        batch["extra_info"] = infos
    return batch


def _pair_batch(batch: list[Any]) -> bool:
    """Whether a batch is of preference pairs; a batch mixing pairs with single sequences is refused
    (stacked, its rows would no longer be chosen sides then rejected ones; concatenated, its rows
    would not all be pairs for the loss that splits them by ``token_type_ids``)."""
    pairs = sum(isinstance(item, dict) and "chosen" in item for item in batch)
    if 0 < pairs < len(batch):
        raise UsageError(f"a batch mixes preference pairs (chosen/rejected) and single sequences ({pairs} of its "
                         f"{len(batch)} items are pairs): the Collator batches one kind at a time (keep pair and "
                         "SFT data in separate stores or mixtures)")
    return bool(pairs)


def _say_unweighted(labels: np.ndarray, weights: np.ndarray) -> None:
    """Say once, when a batch's supervised tokens weigh other than 1, that a loss reading labels
    only (a model's own, transformers.Trainer's default) would train them at 1."""
    global _said_unweighted
    odd = weights[labels != IGNORE]
    odd = odd[odd != 1.0]
    if odd.size:
        _said_unweighted = True
        logger.warning("a batch's loss_weights weigh %d of its supervised tokens other than 1 (%g, ...): a model's "
                       "own loss (transformers.Trainer's default) trains them at 1. Train with dataidx.WeightedLoss "
                       "or dataidx.weighted_loss, which read them (then Collator(..., weighted=True)); not repeated",
                       odd.size, odd[0])


def _positions(samples: list[dict[str, Any]], sizes: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Every sample's position ids end to end: its own (a tree's branches continue their parent's)
    or 0, 1, 2, ..."""
    counting = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
    for number, sample in enumerate(samples):
        if "position_ids" in sample:
            counting[starts[number]: starts[number] + sizes[number]] = sample["position_ids"]
    return counting


def _length(sample: dict[str, Any], number: int) -> int:
    """A sample's tokens, once its labels and loss weights are known to be as many."""
    length = len(sample["input_ids"])
    if not length == len(sample["labels"]) == len(_weights(sample)):
        raise UsageError(f"sample {number} of the batch has {length} input_ids, {len(sample['labels'])} labels and "
                         f"{len(_weights(sample))} loss_weights: they must be as long")
    return length


def _real(lengths: list[int]) -> np.ndarray:
    """``[rows, longest]`` booleans: which cells of a right-padded batch hold tokens."""
    sizes = np.array(lengths, dtype=np.int64)
    return np.arange(int(sizes.max(initial=0))) < sizes[:, None]


def _filled(real: np.ndarray, values: np.ndarray, fill: float) -> torch.Tensor:
    """A ``real.shape`` tensor of ``fill`` with ``values`` (every row's, end to end) in its real
    cells: row-major, so each row's values land left-aligned in its own row. One conversion a
    batch, not one per row."""
    out = np.full(real.shape, fill, dtype=values.dtype)
    out[real] = values
    return torch.from_numpy(out)

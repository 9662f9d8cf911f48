"""LLaMA-Factory v1's SFT loss over a :class:`~.collate.Collator`'s batches, and a
``transformers.Trainer`` mixin that trains it.

A model's own loss (what ``transformers.Trainer`` trains by default) reads ``labels`` only: every
supervised token trains at weight 1, and v1's per-message ``loss_weight`` between 0 and 1 is lost
in silence. v1 (``trainers/sft_trainer.py``, ff6d4d12) weighs each token's cross-entropy by its
loss weight and divides by the batch's total weight, one token shifted as a causal LM predicts:
``(-log_probs * w).sum() / (w.sum() + 1e-6)``. With several micro-batches a step
(``core/base_trainer.py``), each one's loss counts by its share of the step's supervised tokens.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import UsageError
from ..render import IGNORE
from .collate import Collator
from .masks import block_causal_mask

#: v1's guard against a batch that trains nothing (``w.sum() + 1e-6``).
EPSILON = 1e-6
#: What a Collator's batch holds besides a transformers model's inputs (``token_type_ids`` of
#: concatenated pairs tell the loss the sides apart, as v1's DPO trainer reads them; the model
#: gets them as ``sample_ids``' block mask).
NOT_MODEL_INPUTS = ("labels", "loss_weights", "sample_ids", "segment_ids", "segment_ancestors", "cu_seq_lens",
                    "max_length", "token_type_ids", "extra_info")


def weighted_loss(logits: torch.Tensor, labels: torch.Tensor, loss_weights: torch.Tensor) -> torch.Tensor:
    """v1's SFT loss of a batch: each supervised token's cross-entropy times its loss weight,
    summed, over the batch's summed weight (in float32, whatever the model's dtype).

    Example::

        batch = Collator(pad_token_id=0)(samples)
        loss = weighted_loss(model(**model_inputs(batch)).logits, batch["labels"], batch["loss_weights"])
    """
    labels, weights = labels[..., 1:], loss_weights[..., 1:].float()
    losses = F.cross_entropy(logits[..., :-1, :].flatten(0, -2).float(), labels.flatten(), ignore_index=IGNORE,
                             reduction="none")
    return (losses * weights.flatten()).sum() / (weights.sum() + EPSILON)


def model_inputs(batch: dict[str, Any], mask_dtype: torch.dtype | None = None) -> dict[str, Any]:
    """What a transformers model's ``forward`` takes of a Collator's batch: ids, positions and an
    attention mask that keeps packed samples apart (a chain plan's block-causal mask from
    ``sample_ids``; a tree plan's batch carries its own). ``mask_dtype``, the model's, makes that
    mask additive, as eager attention needs (SDPA takes the boolean one)."""
    inputs = {key: value for key, value in batch.items() if key not in NOT_MODEL_INPUTS}
    if "sample_ids" in batch and "segment_ids" not in batch:  # packed: no sample attends to another
        inputs["attention_mask"] = block_causal_mask(batch["sample_ids"], mask_dtype)
    return inputs


class WeightedLoss:
    """A ``transformers.Trainer`` mixin that trains v1's loss (:func:`weighted_loss`) on a
    Collator's batches instead of the model's own, which drops ``loss_weights``. A ``Collator``
    passed as ``data_collator`` is told its weights are read, so it does not warn.

    With gradient accumulation the Trainer counts a step's supervised tokens over all its
    batches (and devices, when it averages across them): each batch's loss then counts by its
    share of them, as v1 weighs its micro-batches.

    Example::

        class V1Trainer(WeightedLoss, Trainer):
            pass

        trainer = V1Trainer(model=model, args=TrainingArguments(..., remove_unused_columns=False),
                            train_dataset=DataEngine("demo.db", render="default"),
                            data_collator=Collator(pad_token_id=0))
    """

    # What the Trainer this mixes into has, for type checkers.
    args: Any
    accelerator: Any
    data_collator: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        collator = getattr(self, "data_collator", None)
        if isinstance(collator, Collator) and not collator.weighted:
            read = copy.copy(collator)  # the caller's own collator stays as it was
            read.weighted = True
            self.data_collator = read

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        """v1's loss of one batch (of a step's, with ``num_items_in_batch`` its supervised tokens)."""
        if "loss_weights" not in inputs:
            raise UsageError(f"WeightedLoss trains on a batch's loss_weights; this one has "
                             f"{', '.join(sorted(inputs))}: collate it with dataidx.Collator")
        outputs = model(**model_inputs(inputs))
        loss = weighted_loss(outputs.logits, inputs["labels"], inputs["loss_weights"])
        if num_items_in_batch is not None:
            # The Trainer then leaves the loss as it is (it divides by the accumulation steps only
            # without a count), so each batch's share of the step's tokens is set here, as v1 sets it.
            loss = loss * (inputs["labels"][..., 1:] != IGNORE).sum() / num_items_in_batch
            if getattr(self.args, "average_tokens_across_devices", False):
                loss = loss * self.accelerator.num_processes  # the count is every device's; DDP averages
        return (loss, outputs) if return_outputs else loss

"""Collate rendered entries into padded batches, or packs into packed rows for varlen attention.

Padding is decided by length, never by comparing token ids (a pad id equal to EOS would
otherwise unlabel every supervised end-of-turn). A packed row concatenates its samples with
``position_ids`` restarting at 0, the first label of every sample after the first set to -100
(that token would be predicted from the previous sample), ``cu_seq_lens`` and ``max_length``
(over the flattened ``[batch * width]`` layout, each row's padding a segment of its own) for
flash-attention's varlen kernels, and ``sample_ids`` from which :func:`block_causal_mask`
builds the mask for attention implementations that take one: no sample attends to another.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import UsageError
from ..render import IGNORE


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

    Preference entries become one padded batch of every chosen side followed by every rejected
    side (``2 * batch`` rows), as pairwise trainers expect.

    Example::

        loader = DataLoader(PackedDataset("demo.db"), batch_size=2, collate_fn=Collator(pad_token_id=0))
    """

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, batch: list[Any]) -> dict[str, Any]:
        if batch and isinstance(batch[0], list):
            return self.packed(batch)
        if batch and "chosen" in batch[0]:
            return self.padded([item["chosen"] for item in batch] + [item["rejected"] for item in batch])
        return self.padded(batch)

    def padded(self, samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """One row per sample, right-padded to the longest."""
        rows = [(s["input_ids"], s["labels"], _weights(s), list(range(len(s["input_ids"])))) for s in samples]
        return self._pad(rows, [[1] * len(s["input_ids"]) for s in samples])

    def packed(self, packs: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """One row per pack: its samples end to end, each restarting its positions."""
        rows, sample_ids, row_lengths = [], [], []
        for pack in packs:
            lengths: list[int] = []
            ids: list[int] = []
            labels: list[int] = []
            weights: list[float] = []
            positions: list[int] = []
            owners: list[int] = []
            for number, sample in enumerate(pack, start=1):
                if "input_ids" not in sample:
                    raise ValueError("preference entries (chosen/rejected) cannot be packed; batch them padded")
                length = len(sample["input_ids"])
                sample_labels = list(sample["labels"])
                sample_weights = list(_weights(sample))
                if number > 1 and length:
                    sample_labels[0], sample_weights[0] = IGNORE, 0.0
                ids += sample["input_ids"]
                labels += sample_labels
                weights += sample_weights
                positions += range(length)
                owners += [number] * length
                lengths.append(length)
            rows.append((ids, labels, weights, positions))
            sample_ids.append(owners)
            row_lengths.append(lengths)
        batch: dict[str, Any] = dict(self._pad(rows, sample_ids))  # and max_length, an int
        batch["sample_ids"] = batch.pop("attention_mask")
        batch["attention_mask"] = (batch["sample_ids"] > 0).long()
        # Segments of the flattened [batch * width] layout: each sample, then each row's padding
        # as a segment of its own, so every segment lies inside one row and one sample.
        width = batch["input_ids"].shape[1]
        segments = []
        for lengths in row_lengths:
            segments += [n for n in lengths if n]
            if width - sum(lengths):
                segments.append(width - sum(lengths))
        batch["cu_seq_lens"] = torch.tensor([0, *torch.tensor(segments, dtype=torch.long).cumsum(0).tolist()],
                                            dtype=torch.int32)
        batch["max_length"] = max(segments, default=0)
        return batch

    def _pad(self, rows: list[tuple[list, list, list, list]], masks: list[list[int]]) -> dict[str, torch.Tensor]:
        width = max((len(row[0]) for row in rows), default=0)
        shape = (len(rows), width)
        batch = {
            "input_ids": torch.full(shape, self.pad_token_id, dtype=torch.long),
            "labels": torch.full(shape, IGNORE, dtype=torch.long),
            "loss_weights": torch.zeros(shape, dtype=torch.float32),
            "position_ids": torch.zeros(shape, dtype=torch.long),
            "attention_mask": torch.zeros(shape, dtype=torch.long),
        }
        for i, ((ids, labels, weights, positions), mask) in enumerate(zip(rows, masks)):
            n = len(ids)
            batch["input_ids"][i, :n] = torch.tensor(ids, dtype=torch.long)
            batch["labels"][i, :n] = torch.tensor(labels, dtype=torch.long)
            batch["loss_weights"][i, :n] = torch.tensor(weights, dtype=torch.float32)
            batch["position_ids"][i, :n] = torch.tensor(positions, dtype=torch.long)
            batch["attention_mask"][i, :n] = torch.tensor(mask, dtype=torch.long)
        return batch


def block_causal_mask(sample_ids: torch.Tensor) -> torch.Tensor:
    """``[batch, 1, length, length]`` booleans: token ``q`` may attend to ``k`` only when both
    belong to the same sample (ids above 0) and ``k <= q``. Padding attends to nothing."""
    same = sample_ids[:, :, None] == sample_ids[:, None, :]
    real = (sample_ids > 0)[:, :, None]
    causal = torch.ones(sample_ids.shape[1], sample_ids.shape[1], dtype=torch.bool).tril()
    return (same & real & causal)[:, None]

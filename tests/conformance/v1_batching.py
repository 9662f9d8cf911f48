"""LLaMA-Factory v1's dynamic batchers (ff6d4d12), run from its source: the micro-batches they
cut from a stream of samples of given lengths, fed to them one sample at a time as v1's data
loader feeds its buffer (``get_data_provider_batch_size`` is 1 for both)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .v1 import _v1_package

#: dataidx's strategy names and v1's batcher classes.
BATCHERS = {"dynamic": "DynamicBatcher", "dynamic-padding-free": "DynamicPaddingFreeBatcher"}


def v1_steps(source: Path, strategy: str, lengths: list[int], *, cutoff: int, micro_batch_size: int,
             num_micro_batch: int) -> list[list[int]]:
    """Per step v1 makes, the sample count of each micro-batch, read from the batches it returns
    (a padded batch's rows; a packed sequence's position_ids restarting at 0)."""
    _v1_package(source)
    from llamafactory.v1.plugins.trainer_plugins import batching  # type: ignore[import-not-found]
    from llamafactory.v1.utils.objects import StatefulBuffer  # type: ignore[import-not-found]

    batcher = getattr(batching, BATCHERS[strategy])
    info = {"cutoff_len": cutoff, "micro_batch_size": micro_batch_size, "num_micro_batch": num_micro_batch}
    samples = iter([{"input_ids": [1] * length, "attention_mask": [1] * length, "labels": [1] * length}
                    for length in lengths])

    def next_samples(_: bool) -> list[dict[str, Any]] | None:
        sample = next(samples, None)
        return None if sample is None else [sample]

    buffer, steps = StatefulBuffer(), []
    while True:
        batcher.fill_buffer(buffer, info, next_samples)
        batch = batcher.generate_batch(buffer, info)
        if batch is None:
            return steps
        steps.append([_samples_in(micro, strategy) for micro in batch])


def _samples_in(micro: dict[str, Any], strategy: str) -> int:
    if strategy == "dynamic":
        return int(micro["input_ids"].shape[0])
    return int((micro["position_ids"][0] == 0).sum())

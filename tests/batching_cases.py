"""Length streams the batching conformance covers: lognormal lengths (most short, a long tail
past the cutoff), uniform ones, lengths at the budget exactly, and single samples, under several
cutoffs, micro-batch sizes and micro-batches per step."""

from __future__ import annotations

from typing import Any

import numpy as np

CASES: list[dict[str, Any]] = [
    {"strategy": strategy, "kind": kind, "seed": seed, "count": count, "cutoff": cutoff,
     "micro_batch_size": micro_batch_size, "num_micro_batch": num_micro_batch}
    for strategy in ("dynamic", "dynamic-padding-free")
    for kind, seed, count, cutoff, micro_batch_size, num_micro_batch in (
        ("lognormal", 1, 3000, 512, 4, 2), ("lognormal", 2, 2000, 1024, 1, 4), ("lognormal", 3, 1500, 256, 8, 1),
        ("uniform", 4, 2000, 128, 2, 3), ("exact", 5, 400, 64, 4, 2), ("ones", 6, 200, 16, 2, 2),
        ("lognormal", 7, 5, 512, 4, 1))
]


def case_lengths(case: dict[str, Any]) -> list[int]:
    rng = np.random.default_rng(case["seed"])
    count, cutoff = case["count"], case["cutoff"]
    if case["kind"] == "lognormal":
        found = rng.lognormal(np.log(cutoff / 6), 1.2, count)
    elif case["kind"] == "uniform":
        found = rng.integers(1, 2 * cutoff, count)
    elif case["kind"] == "exact":  # divisors of the budget: micro-batches that meet it exactly
        found = rng.choice([cutoff // 4, cutoff // 2, cutoff, cutoff * case["micro_batch_size"] // 8 or 1], count)
    else:
        found = np.ones(count)
    return [max(1, int(length)) for length in found]

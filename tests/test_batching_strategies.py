"""v1's dynamic batching strategies as dataidx plans them (issue 56): the same micro-batches as
v1's own batchers (plugins/trainer_plugins/batching.py at ff6d4d12) on the same stream of
samples. With DATAIDX_LLAMAFACTORY naming v1's src, v1 runs here on every case; else the
micro-batches it made are read from tests/conformance/golden/batching.json
(scripts/batching_goldens.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataidx.pack.strategies import micro_batches

from .batching_cases import CASES, case_lengths

GOLDEN = Path(__file__).parent / "conformance" / "golden" / "batching.json"


def v1_cases() -> list[dict[str, Any]]:
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):
        from .conformance.v1_batching import v1_steps

        return [{**case, "steps": v1_steps(Path(source), case["strategy"], case_lengths(case), cutoff=case["cutoff"],
                                           micro_batch_size=case["micro_batch_size"],
                                           num_micro_batch=case["num_micro_batch"])} for case in CASES]
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("case", v1_cases(), ids=lambda case: f"{case['strategy']}-{case['kind']}-{case['seed']}")
def test_the_micro_batches_are_v1s(case: dict[str, Any]) -> None:
    sizes = micro_batches(case["strategy"], np.array(case_lengths(case)), cutoff=case["cutoff"],
                          micro_batch_size=case["micro_batch_size"], num_micro_batch=case["num_micro_batch"])
    assert sizes.reshape(-1, case["num_micro_batch"]).tolist() == case["steps"]


def test_every_case_makes_steps_and_the_goldens_are_the_cases() -> None:
    recorded = json.loads(GOLDEN.read_text())
    assert [{key: value for key, value in case.items() if key != "steps"} for case in recorded] == CASES
    assert all(case["steps"] or case["count"] < 10 for case in recorded)  # five samples make no whole step

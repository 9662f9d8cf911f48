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
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.pack.strategies import micro_batches
from dataidx.store import run_query
from dataidx.training import Collator, PackedDataset

from .batching_cases import CASES, case_lengths
from .helpers import one_line_error
from .test_balance import long_tailed_store  # noqa: F401 - a store of long-tailed lengths, a fixture

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


@pytest.mark.parametrize("strategy", ["dynamic", "dynamic-padding-free"])
def test_a_stored_plan_is_v1s_micro_batches_of_its_stream_and_is_served_as_v1_batches_them(
        strategy: str, long_tailed_store: Path, tmp_path: Path) -> None:  # noqa: F811
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--strategy", strategy, "--micro-batch-size",
                                      "2", "--name", "v1", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert f"{strategy} micro-batches of 4096 tokens" in result.stderr
    rows = run_query(store, "SELECT pack, tokens FROM pack_members WHERE plan = 'v1' ORDER BY pack, slot")[1]
    stream = [tokens for _, tokens in rows]
    sizes = np.bincount([pack for pack, _ in rows]).tolist()
    assert [(sum(sizes),)] == run_query(store, "SELECT entries FROM pack_plans WHERE plan = 'v1'")[1]
    assert sizes[:-1] == micro_batches(strategy, np.array(stream), cutoff=2048,
                                                              micro_batch_size=2, num_micro_batch=1).tolist()
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):  # v1 itself on the plan's stream
        from .conformance.v1_batching import v1_steps

        assert [step[0] for step in v1_steps(Path(source), strategy, stream, cutoff=2048, micro_batch_size=2,
                                             num_micro_batch=1)] == sizes[:-1]
    with PackedDataset(store, plan="v1") as packs:
        assert packs.strategy == strategy
        collate = Collator(pad_token_id=0, packs="rows" if strategy == "dynamic" else "packed")
        for index in range(len(packs) - 1):  # the micro-batches v1 finishes
            batch = collate([packs[index]])
            rows_, width = batch["input_ids"].shape
            if strategy == "dynamic":  # a padded row a sample: count x longest within the budget
                assert rows_ == sizes[index] and rows_ * width <= 4096 and batch["attention_mask"].sum() == sum(
                    stream[sum(sizes[:index]):sum(sizes[:index + 1])])
            else:  # one packed row of its samples
                assert rows_ == 1 and width <= 4096 and len(batch["cu_seq_lens"]) >= sizes[index] + 1


@pytest.mark.parametrize(("arguments", "said"), [
    (["--strategy", "dynamic"], "--micro-batch-size"),
    (["--strategy", "dynamic", "--micro-batch-size", "2", "--capacity", "100"], "no --capacity"),
    (["--capacity", "100", "--micro-batch-size", "2"], "--micro-batch-size"),
    (["--strategy", "dynamic", "--micro-batch-size", "0"], "1 or more"),
])
def test_a_strategy_asked_wrongly_is_one_line_and_writes_nothing(long_tailed_store: Path, tmp_path: Path,  # noqa: F811
                                                                  arguments: list[str], said: str) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    one_line_error(CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--name", "x", *arguments]), said)
    assert run_query(store, "SELECT count(*) FROM packing_plans")[1] == [(0,)]

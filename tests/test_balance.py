"""Compute-balanced pack orders (issue 56): each global step gives every rank the same number of
packs, of about equal estimated cost, where today's seeded shuffle leaves the rank holding a long
sequence's pack far above the mean; the packs themselves (and their fill) are the plan's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.errors import UsageError
from dataidx.index import build
from dataidx.pack.balance import CostModel, balanced_order, imbalance, pack_costs, rank_costs
from dataidx.pack.planner import plan_packs
from dataidx.store import run_query
from dataidx.training import OrderSampler, PackedDataset

from .helpers import one_line_error, write_jsonl, write_yaml

LLAMA_7B = {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008, "num_attention_heads": 32,
            "vocab_size": 32000}


def long_tailed(count: int, cutoff: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(np.maximum(rng.lognormal(np.log(cutoff / 20), 1.2, count).astype(np.int64), 1), cutoff)


@pytest.mark.parametrize(("world_size", "micro_batches"), [(8, 1), (8, 4), (3, 2), (1, 5)])
def test_every_step_is_balanced_within_five_percent_with_equal_packs_per_rank(world_size: int,
                                                                              micro_batches: int) -> None:
    lengths = long_tailed(40_000, 32_768)  # the cutoff: attention is up to half a long pack's cost
    plan = plan_packs(lengths, 32_768, seed=0)
    costs = pack_costs(CostModel.of_config(LLAMA_7B), lengths[plan.members], plan.sizes)
    order = balanced_order(costs, world_size=world_size, micro_batches=micro_batches, seed=3)
    assert sorted(order.tolist()) == list(range(len(costs)))  # every pack, once
    balanced = imbalance(rank_costs(costs, order, world_size=world_size, micro_batches=micro_batches))
    shuffled = imbalance(rank_costs(costs, np.arange(len(costs)), world_size=world_size,
                                    micro_batches=micro_batches))
    assert balanced.max() <= 1.05 and len(balanced) == len(costs) // (world_size * micro_batches)
    if world_size > 1:  # what a token-balanced plan leaves: tokens equal, compute not
        assert shuffled.mean() > balanced.mean() + 0.02 and shuffled.max() > 1.1
    tokens = rank_costs(plan.pack_tokens.astype(np.float64), np.arange(len(costs)), world_size=world_size,
                        micro_batches=micro_batches)
    assert imbalance(tokens).mean() < 1.01 or world_size == 1  # and its tokens are balanced already


def test_the_order_is_the_seeds_and_the_tail_comes_last() -> None:
    costs = np.random.default_rng(1).random(103)
    first, again, other = (balanced_order(costs, world_size=4, micro_batches=2, seed=seed) for seed in (5, 5, 6))
    assert first.tolist() == again.tolist() and first.tolist() != other.tolist()
    assert sorted(first[96:].tolist()) == sorted(np.argsort(-costs, kind="stable")[96:].tolist())  # the cheapest 7


def test_a_long_sequence_costs_more_than_short_ones_of_its_tokens() -> None:
    model = CostModel.of_config(LLAMA_7B)
    one = pack_costs(model, np.array([1024]), np.array([1]))
    two = pack_costs(model, np.array([512, 512]), np.array([2]))
    assert model.a == pytest.approx(6 * 6_607_077_376, rel=1e-9) and model.b == 6 * 32 * 4096
    assert one[0] > two[0] and one[0] - two[0] == pytest.approx(model.b * (1024**2 - 2 * 512**2))


def test_a_config_without_its_sizes_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="hidden_size, num_hidden_layers"):
        CostModel.of_config({"hidden_size": 64})
    with pytest.raises(ValueError, match="whole numbers"):
        CostModel.of_config({**LLAMA_7B, "num_hidden_layers": "many"})


@pytest.fixture(scope="module")
def long_tailed_store(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    """600 alpaca rows of long-tailed lengths, rendered with the tiny tokenizer (cutoff 2048)."""
    folder = tmp_path_factory.mktemp("balanced")
    words = long_tailed(600, 1500, seed=4)
    write_jsonl(folder / "a.jsonl", [{"instruction": "say", "output": " ".join(["word"] * int(n))} for n in words])
    write_yaml(folder / "d.yaml", f"a:\n  path: {folder / 'a.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(folder / "d.yaml", folder / "d.db")
    result = CliRunner().invoke(cli, ["render", str(folder / "d.db"), "--tokenizer", str(tiny_tokenizer), "--cutoff",
                                      "2048", "--truncation", "drop", "--name", "s", "-q"])
    assert result.exit_code == 0, result.output
    return folder / "d.db"


def test_a_balanced_plan_keeps_its_promise_in_sql_and_as_the_sampler_reads_it(long_tailed_store: Path,
                                                                                tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    runner = CliRunner()
    for name, balance in (("tokens", "tokens"), ("compute", "compute")):
        result = runner.invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", name,
                                     "--world-size", "2", "--micro-batches", "2", "--balance", balance, "--cost",
                                     "1,0.01"])
        assert result.exit_code == 0, result.output
        assert "2 ranks x 2 packs a step" in result.stderr and "(view plan_balance)" in result.stderr
    worst = dict(run_query(store, "SELECT plan, max(imbalance) FROM plan_balance GROUP BY plan")[1])
    assert worst["compute"] <= 1.05 < worst["tokens"]
    steps = run_query(store, "SELECT step, rank, tokens FROM plan_balance WHERE plan = 'compute' AND epoch = 0 "
                             "ORDER BY step, rank")[1]
    with PackedDataset(store, plan="compute") as packs:
        read = {}
        for rank in (0, 1):
            sampler = OrderSampler(packs, world_size=2, global_batch_size=4, seed=None, rank=rank)
            for step, batch in enumerate(sampler):
                read[(step, rank)] = sum(len(member["input_ids"]) for index in batch for member in packs[index])
        assert [(step, rank, tokens) for (step, rank), tokens in sorted(read.items())] == steps
        for arguments in ({"world_size": 4, "global_batch_size": 8, "seed": None},
                          {"world_size": 2, "global_batch_size": 4, "seed": 0}):
            with pytest.raises(UsageError, match="balanced for 2 ranks taking 2 packs a step"):
                OrderSampler(packs, **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(("arguments", "said"), [
    (["--balance", "compute"], "give --world-size"),
    (["--world-size", "2", "--cost", "x,y"], "two numbers A,B"),
    (["--world-size", "2", "--cost", "-1,2"], "not negative"),
    (["--world-size", "2"], "has no config.json"),
    (["--world-size", "2", "--cost-config", "nowhere"], "nowhere has no config.json"),
    (["--world-size", "2", "--cost", "1,0", "--merge-cuts"], "give one or the other"),
])
def test_a_plan_for_a_topology_asked_wrongly_is_one_line_and_writes_nothing(long_tailed_store: Path,
                                                                            tmp_path: Path, arguments: list[str],
                                                                            said: str) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    one_line_error(CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", "x",
                                            *arguments]), said)
    assert run_query(store, "SELECT count(*) FROM packing_plans")[1] == [(0,)]


BALANCED_RANK = """
import json, sys
import torch.distributed as dist
from torch.utils.data import DataLoader
from dataidx import Collator, OrderSampler, PackedDataset

store, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
collate = Collator(pad_token_id=0)
with PackedDataset(store, plan="compute") as packs:
    sampler = OrderSampler(packs, world_size=world, global_batch_size=2 * world, seed=None, rank=rank)
    steps = []
    for items in DataLoader(packs, batch_sampler=sampler, collate_fn=list):
        batch = collate(items)  # what the model gets: a row a pack
        lengths = [len(member["input_ids"]) for pack in items for member in pack]
        assert int(batch["attention_mask"].sum()) == sum(lengths)
        gathered = [None] * world
        dist.all_gather_object(gathered, lengths)
        steps.append(gathered)
if rank == 0:
    json.dump(steps, open(out, "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow  # two processes importing torch
def test_two_gloo_ranks_read_the_balanced_plan_as_plan_balance_promises(long_tailed_store: Path,
                                                                        tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", "compute",
                                      "--world-size", "2", "--micro-batches", "2", "--balance", "compute", "--cost",
                                      "1,0.01"])
    assert result.exit_code == 0, result.output
    script = tmp_path / "rank.py"
    script.write_text(BALANCED_RANK)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-port",
                    str(31500 + os.getpid() % 1000), str(script), str(store), str(tmp_path / "steps.json")],
                   check=True, capture_output=True, timeout=300)
    steps = json.loads((tmp_path / "steps.json").read_text())
    promised = run_query(store, "SELECT step, rank, tokens, cost, imbalance FROM plan_balance WHERE plan = 'compute' "
                                "AND epoch = 0 ORDER BY step, rank")[1]
    assert len(steps) * 2 == len(promised) and len(steps) > 5
    for step, rank, tokens, cost, ratio in promised:
        read = steps[step][rank]  # the sequences rank `rank` trained at step `step`
        assert sum(read) == tokens and sum(n + 0.01 * n * n for n in read) == pytest.approx(cost)
        assert ratio <= 1.05


@pytest.mark.slow  # a real browser
def test_the_report_draws_each_steps_balance_as_the_view_counts_it(long_tailed_store: Path, tmp_path: Path,
                                                                   browser) -> None:
    from dataidx.view import report_figures, write_report

    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    assert CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", "ranks",
                                    "--world-size", "2", "--balance", "compute", "--cost", "1,0.01"]).exit_code == 0
    steps, worst = run_query(store, "SELECT count(DISTINCT step), max(imbalance) FROM plan_balance "
                                    "WHERE plan = 'ranks'")[1][0]
    document = report_figures(store, spec="s", plan="ranks", samples=0)["plan"]
    assert document["topology"] == {"world_size": 2, "micro_batches": 1, "balance": "compute"}
    assert len(document["balance"]) == steps and max(row["imbalance"] for row in document["balance"]) == worst
    write_report(store, tmp_path / "r.html", spec="s", plan="ranks", samples=0)
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    page.goto((tmp_path / "r.html").as_uri())
    chart = page.locator("#chart-balance")
    assert chart.get_attribute("data-steps") == str(steps) and float(chart.get_attribute("data-worst")) == \
        pytest.approx(worst)
    bars = chart.locator("[id^='mark-balance-']")
    assert bars.count() == steps
    box = bars.first.bounding_box()
    assert box and box["width"] > 0
    assert "2 ranks taking 1 packs a step, balanced by compute" in page.locator("#plan-balance").inner_text()
    page.close()


TRAINER_RANK = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from tests.test_training_order import documented, _tiny_llama
from transformers import AutoTokenizer, TrainingArguments
from dataidx import Collator, OrderSampler, PackedDataset

store, tokenizer_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
recipe = documented("training-orders.md", "**transformers.Trainer**")  # the documented recipe, as written
tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
collate = Collator(pad_token_id=tokenizer.pad_token_id)
arguments = TrainingArguments(output_dir=str(Path(out).parent / "out"), max_steps=4, report_to=[], use_cpu=True,
                              ddp_backend="gloo", per_device_train_batch_size=2, disable_tqdm=True,
                              remove_unused_columns=False, ignore_data_skip=True, save_strategy="no")
seen = []
def spy(items):
    seen.append([len(member["input_ids"]) for pack in items for member in pack])
    return collate(items)
with PackedDataset(store, plan="compute") as packs:
    world, rank = arguments.world_size, arguments.process_index
    sampler = OrderSampler(packs, world_size=world, rank=rank, global_batch_size=2 * world, seed=None)
    trainer = recipe["OrderTrainer"](model=_tiny_llama(len(tokenizer)), args=arguments, train_dataset=packs,
                                     data_collator=spy, sampler=sampler)
    trainer.train()
Path(f"{out}.{rank}").write_text(json.dumps(seen))
"""


@pytest.mark.slow  # two processes training a tiny model
def test_a_transformers_trainer_on_two_ranks_trains_the_balanced_steps(long_tailed_store: Path, tmp_path: Path,
                                                                      tiny_tokenizer: Path) -> None:
    """docs/training-orders.md's Trainer recipe under torchrun (DDP over gloo, accelerate's), fed
    a compute-balanced plan's sampler: each rank trains, step by step, the packs plan_balance says."""
    import json
    import os
    import subprocess
    import sys

    from .helpers import REPO

    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    assert CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", "compute",
                                    "--world-size", "2", "--micro-batches", "2", "--balance", "compute", "--cost",
                                    "1,0.01"]).exit_code == 0
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER_RANK)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-port",
                    str(32500 + os.getpid() % 1000), str(script), str(store), str(tiny_tokenizer),
                    str(tmp_path / "seen"), str(REPO)], check=True, capture_output=True, timeout=300)
    seen = [json.loads((tmp_path / f"seen.{rank}").read_text()) for rank in (0, 1)]
    promised = run_query(store, "SELECT step, rank, tokens FROM plan_balance WHERE plan = 'compute' AND epoch = 0 "
                                "AND step < 4 ORDER BY step, rank")[1]
    assert [(step, rank, sum(seen[rank][step])) for step in range(4) for rank in (0, 1)] == promised


def test_padded_micro_batches_are_balanced_with_their_padding(long_tailed_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "s", "--strategy", "dynamic", "--micro-batch-size",
                                      "2", "--name", "padded", "--world-size", "2", "--micro-batches", "2", "--balance",
                                      "compute", "--cost", "1,0.01"])
    assert result.exit_code == 0, result.output
    costs = run_query(store, "SELECT m.pack, count(*), max(m.tokens) FROM pack_members AS m WHERE m.plan = 'padded' "
                             "GROUP BY m.pack ORDER BY m.pack")[1]
    padded = {pack: count * (longest + 0.01 * longest * longest) for pack, count, longest in costs}
    rows = run_query(store, "SELECT step, rank, cost, imbalance FROM plan_balance WHERE plan = 'padded' "
                            "ORDER BY step, rank")[1]
    assert rows and all(ratio <= 1.05 for *_, ratio in rows)
    for step, rank, cost, _ in rows:  # the view costs each micro-batch padded: count x longest
        assert cost == pytest.approx(sum(padded[4 * step + 2 * rank + k] for k in (0, 1)))


def test_a_skip_list_over_a_balanced_plan_says_the_balance_no_longer_holds(long_tailed_store: Path, tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(long_tailed_store.read_bytes())
    runner = CliRunner()
    assert runner.invoke(cli, ["pack", str(store), "--spec", "s", "--capacity", "2048", "--name", "compute",
                               "--world-size", "2", "--micro-batches", "2", "--balance", "compute", "--cost",
                               "1,0.01"]).exit_code == 0
    with PackedDataset(store, plan="compute") as packs:
        with caplog.at_level("WARNING"):
            list(OrderSampler(packs, world_size=2, global_batch_size=4, seed=None))
        assert "no longer holds" not in caplog.text  # no skip list: nothing to say
    assert runner.invoke(cli, ["skip", str(store), "spikes", "--entry", "a:3", "--why", "loss spike"]).exit_code == 0
    with PackedDataset(store, plan="compute") as packs, caplog.at_level("WARNING"):
        list(OrderSampler(packs, world_size=2, global_batch_size=4, seed=None))
    assert "leave 1 packs of epoch 0 out" in caplog.text and "balance of those steps no longer holds" in caplog.text

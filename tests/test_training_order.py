"""Training orders: a keyed permutation per epoch, and a batch sampler whose state is one global
position, so a run resumes on any world size, worker count or global batch size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, Dataset

from dataidx import DataEngine, OrderSampler
from dataidx.cli import cli
from dataidx.errors import UsageError
from dataidx.read.order import TrainingOrder

from .helpers import examples

#: Global batch size -> the world sizes it splits over evenly, among those the issue names.
WORLDS = {6: [1, 2, 3], 8: [1, 2, 4, 8], 12: [1, 2, 3, 4], 30: [1, 2, 3]}


@given(st.integers(0, 5000), st.integers(0, 2**32), st.integers(0, 3))
@settings(max_examples=examples(200))
def test_an_order_is_a_permutation_with_its_inverse(length: int, seed: int, epoch: int) -> None:
    order = TrainingOrder(length, seed=seed, epoch=epoch)
    items = order.items(0, length)
    assert np.array_equal(np.sort(items), np.arange(length))
    assert np.array_equal(order.index_of(items), np.arange(length))
    assert np.array_equal(order.at(np.arange(length)[::-1]), items[::-1])  # each item on its own


def test_orders_differ_by_seed_and_epoch_and_repeat_exactly() -> None:
    first = TrainingOrder(10_000, seed=1, epoch=0).items(0, 100)
    assert np.array_equal(first, TrainingOrder(10_000, seed=1, epoch=0).items(0, 100))
    for other in (TrainingOrder(10_000, seed=2, epoch=0), TrainingOrder(10_000, seed=1, epoch=1)):
        assert not np.array_equal(first, other.items(0, 100))
    assert np.array_equal(TrainingOrder(50, seed=None).items(0, 50), np.arange(50))  # no shuffle
    # shuffled, not striding: consecutive items land far apart
    assert np.median(np.abs(np.diff(first))) > 1000


class _Numbered(Dataset):
    """The engine's samples with their index, so a test sees which item a loader delivered (a
    mixture may hold equal samples at several positions)."""

    def __init__(self, engine: DataEngine) -> None:
        self.engine = engine

    def __len__(self) -> int:
        return len(self.engine)

    def __getitem__(self, index: int) -> tuple[int, Any]:
        return index, self.engine[index]

    def state_dict(self) -> dict[str, Any]:
        return self.engine.state_dict()


def _run(engine: DataEngine, segments: list[tuple[int, int, int, int]]) -> tuple[list[int], list[list[int]]]:
    """Read ``engine`` in segments ``(world, workers, global batch, steps)``, each restored from
    the state the one before saved (rank 0's, after its steps). What every global step read, in
    rank order: the items the loaders delivered (each checked to be the engine's sample there)."""
    state: dict[str, Any] | None = None
    read: list[int] = []
    steps_read: list[list[int]] = []
    numbered = _Numbered(engine)
    for world, workers, global_batch, steps in segments:
        samplers = [OrderSampler(numbered, global_batch_size=global_batch, rank=rank, world_size=world, seed=7)
                    for rank in range(world)]
        if state is not None:
            for sampler in samplers:
                sampler.load_state_dict(state)
        done = 0
        while True:
            loaders = [iter(DataLoader(numbered, batch_sampler=sampler, num_workers=workers, collate_fn=list))
                       for sampler in samplers]
            in_epoch = 0
            for batches in zip(*loaders):
                step = [index for batch in batches for index, _ in batch]
                assert all(sample == engine[index] for batch in batches for index, sample in batch[:1])
                assert all(len(batch) == global_batch // world for batch in batches)
                steps_read.append(step)
                read += step
                done, in_epoch = done + 1, in_epoch + 1
                if done == steps:
                    break
            if done == steps:
                break
            for sampler in samplers:  # the epoch was read to its end
                sampler.set_epoch(sampler.epoch + 1)
        state = samplers[0].state_dict(in_epoch)
        assert all(sampler.state_dict(in_epoch) == state for sampler in samplers)
    return read, steps_read


def _expected(length: int, segments: list[tuple[int, int, int, int]]) -> list[int]:
    """The uninterrupted run: one global order, each epoch read in global batches of whatever size
    is in force, its tail that does not fill one trimmed."""
    read: list[int] = []
    epoch, position = 0, 0
    for _, _, global_batch, steps in segments:
        for _ in range(steps):
            if position + global_batch > length:
                epoch, position = epoch + 1, 0
            read += TrainingOrder(length, seed=7, epoch=epoch).items(position, position + global_batch).tolist()
            position += global_batch
    return read


@st.composite
def _segments(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    segments = []
    for _ in range(4):
        global_batch = draw(st.sampled_from(sorted(WORLDS)))
        segments.append((draw(st.sampled_from(WORLDS[global_batch])), draw(st.sampled_from([0, 1, 2])),
                         global_batch, draw(st.integers(1, 9))))
    return segments


@pytest.mark.slow
@given(_segments())
# 8 runs of four segments each (32 resumes, up to two DataLoader workers a rank forked for each)
@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_run_resumed_on_other_topologies_reads_the_uninterrupted_order(
        demo_store: Path, segments: list[tuple[int, int, int, int]]) -> None:
    with DataEngine(demo_store) as engine:
        read, steps = _run(engine, segments)
        assert read == _expected(len(engine), segments)
        assert [len(step) for step in steps] == [g for _, _, g, n in segments for _ in range(n)]


def test_a_run_crossing_epochs_with_three_resumes_reads_the_uninterrupted_order(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        length = len(engine)
        # world 2 x 2 workers, then 4 x 0, then 3 x 1, then 1 x 4; batches 8, 12, 30, 6: > 1 epoch in all
        segments = [(2, 2, 8, 5), (4, 0, 12, 4), (3, 1, 30, 4), (1, 4, 6, 7)]
        assert sum(g * s for _, _, g, s in segments) > length
        read, _ = _run(engine, segments)
        assert read == _expected(length, segments)


def test_a_state_of_another_order_is_refused_in_one_line(demo_store: Path, tmp_path: Path) -> None:
    with DataEngine(demo_store) as engine:
        sampler = OrderSampler(engine, global_batch_size=8, seed=1)
        next(iter(sampler))
        state = sampler.state_dict()
        assert state["position"] == 8
        for other, match in ((OrderSampler(engine, global_batch_size=8, seed=2), "seed 1; this sampler has 2"),
                             (OrderSampler(engine, global_batch_size=8, seed=1, tail="pad"), "tail 'trim'"),
                             (OrderSampler(list(range(len(engine))), global_batch_size=8, seed=1), "reads")):
            with pytest.raises(UsageError, match=match):
                other.load_state_dict(state)
        with pytest.raises(UsageError, match="not a dataidx order state"):
            sampler.load_state_dict({"epoch": 0})
        with pytest.raises(UsageError, match="does not split evenly over 3 ranks"):
            OrderSampler(engine, global_batch_size=8, world_size=3)


def test_a_state_past_the_epochs_end_or_a_count_past_the_steps_yielded_is_refused(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        sampler = OrderSampler(engine, global_batch_size=4, seed=1)
        batches = iter(sampler)
        next(batches), next(batches)
        with pytest.raises(UsageError, match="steps_done is 3, but this iteration of epoch 0 has yielded 2 steps"):
            sampler.state_dict(3)  # once clamped to the epoch's end in silence: a resume past steps never trained
        state = sampler.state_dict(2)
        assert state["position"] == 8
        for position in (len(engine) + 1, 10**30):  # once accepted: the resumed run read nothing
            with pytest.raises(UsageError, match=f"position is 0..{len(engine)} in epoch 0 of {len(engine)} items, "
                                                 f"not {position}"):
                OrderSampler(engine, global_batch_size=4, seed=1).load_state_dict({**state, "position": position})
        at_end = OrderSampler(engine, global_batch_size=4, seed=1)
        at_end.load_state_dict({**state, "position": len(engine)})  # the epoch read to its end: nothing left
        assert len(at_end) == 0 and list(at_end) == []


@pytest.mark.parametrize("seed", ["abc", 1.5, True, [1]])
def test_a_seed_that_is_not_a_whole_number_is_refused(demo_store: Path, seed: Any) -> None:
    with DataEngine(demo_store) as engine:
        with pytest.raises(UsageError, match="seed is a whole number, or None for the dataset's own order"):
            OrderSampler(engine, global_batch_size=4, seed=seed)
        assert OrderSampler(engine, global_batch_size=4, seed=np.int64(3)).seed == 3  # NumPy's ints are whole numbers


def test_len_of_a_resumed_sampler_is_the_steps_its_next_iteration_yields(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        sampler = OrderSampler(engine, global_batch_size=4, seed=1)
        whole = len(engine) // 4
        batches = iter(sampler)
        for _ in range(3):
            next(batches)
        resumed = OrderSampler(engine, global_batch_size=4, seed=1)
        resumed.load_state_dict(sampler.state_dict(3))
        # once the whole epoch's steps, while only the rest came: a progress bar or a loop sized by len was off
        assert len(resumed) == whole - 3 == len(list(resumed))
        assert resumed.steps_per_epoch == whole and len(resumed) == whole  # read to its end: whole again
        resumed.load_state_dict(sampler.state_dict(3))
        assert resumed.progress(0) == 3 / whole  # the epochs read: the steps before the restore counted
        batches = iter(resumed)
        next(batches)
        assert resumed.progress(1) == 4 / whole and len(resumed) == whole - 3  # the iteration under way


def test_an_order_state_of_other_data_names_what_it_was_saved_over(demo_copy: Path) -> None:
    from dataidx.index import add_mixture

    from .helpers import REPO

    add_mixture(demo_copy, REPO / "data" / "demo_sft.yaml", "seed7", seed=7)
    with DataEngine(demo_copy, "seed7") as engine:
        state = OrderSampler(engine, global_batch_size=4, seed=1).state_dict()
    with DataEngine(demo_copy) as engine:
        with pytest.raises(UsageError, match=r"^this order state was saved over mixture 'seed7', not mixture "
                                             r"'default'; resume it over what it was saved with$"):
            OrderSampler(engine, global_batch_size=4, seed=1).load_state_dict(state)  # once: two lists of digests
        with pytest.raises(UsageError, match="saved over a dataset that is not a dataidx store's; this sampler "
                                             "reads mixture 'default'"):
            OrderSampler(engine, global_batch_size=4, seed=1).load_state_dict({**state, "reads": None})
        mine = OrderSampler(engine, global_batch_size=4, seed=1).state_dict()
    with pytest.raises(UsageError, match="saved over mixture 'default'; this sampler reads a dataset that is not"):
        OrderSampler(list(range(37)), global_batch_size=4, seed=1).load_state_dict(mine)


def test_a_padded_tail_is_read_the_same_on_every_rank(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        length = len(engine)
        samplers = [OrderSampler(engine, global_batch_size=12, rank=rank, world_size=3, seed=0, tail="pad")
                    for rank in range(3)]
        batches = [list(sampler) for sampler in samplers]
        assert len({len(rank) for rank in batches}) == 1 == len({len(b) for rank in batches for b in rank})
        everything = [i for step in zip(*batches) for batch in step for i in batch]
        assert len(everything) == -(-length // 12) * 12
        assert sorted(set(everything)) == list(range(length))  # every item, the tail filled from the start
        trimmed = OrderSampler(engine, global_batch_size=12, seed=0)
        assert len(trimmed) == length // 12


def _steps_json(*args: object) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["steps", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_steps_names_the_entries_each_step_of_a_run_read(demo_copy: Path, tiny_tokenizer: Path) -> None:
    from dataidx.render import RenderRequest, render_store

    render_store(RenderRequest(demo_copy, tiny_tokenizer, cutoff=160, name="short"))  # some entries do not train
    for render in (None, "short"):
        with DataEngine(demo_copy, render=render) as engine:
            samplers = [OrderSampler(engine, global_batch_size=6, rank=rank, world_size=2, seed=3) for rank in (0, 1)]
            for sampler in samplers:
                sampler.set_epoch(1)
            read = [[i for batch in step for i in batch] for step in zip(*samplers)]
            assert len(read) >= 3 and (render is None or len(engine) < engine.reader.reader.length)
            shown = _steps_json(demo_copy, "--global-batch-size", 6, "--seed", 3, "--epoch", 1, f"1-{len(read) - 1}",
                                *(("--render", render) if render else ()))
            assert [[e["step"] for e in shown if e["step"] == s] for s in range(1, len(read))] == \
                [[s] * 6 for s in range(1, len(read))]
            positions = [e["position"] for e in shown]
            reader = engine.reader if render is None else engine.reader.reader
            expected = [i for step in read[1:] for i in step]
            if render is not None:
                expected = engine.reader.positions_at(expected)
            assert positions == expected
            names = {dataset.id: dataset.name for dataset in reader.datasets.values()}
            assert [(e["dataset"], e["row"], e["cut"]) for e in shown] == \
                [(names[d], row, cut) for d, row, cut in reader.triples(positions)]
    result = CliRunner().invoke(cli, ["steps", str(demo_copy), "--global-batch-size", "6", "--epoch", "0", "99"])
    assert result.exit_code == 1 and "outside epoch 0, which has" in result.output


def test_a_malformed_step_range_is_a_usage_error(demo_store: Path) -> None:
    # exit 2, as click's own usage errors, and one line saying what a range is (once: exit 1)
    for args in (("steps", demo_store, "--global-batch-size", 4, "5-3"), ("steps", demo_store, "x", "--epoch", 0),
                 ("skip", demo_store, "s", "--steps", "3-1", "--why", "w", "--global-batch-size", 4)):
        result = _cli(*args)
        assert result.exit_code == 2, result.output
        assert "a step or a range" in result.output.splitlines()[-1]


@given(st.lists(st.integers(0, 9), min_size=1, max_size=4).filter(any), st.integers(1, 4))
@settings(max_examples=examples(100))
def test_a_trainers_global_step_names_the_samplers_epoch_and_steps(epoch_steps: list[int], accumulation: int) -> None:
    from dataidx.read.order import RunNumbering

    # as transformers.Trainer counts: each epoch's batches in groups of the accumulation (the last
    # group what is left), global_step + 1 after each group, from 1, across epochs
    expected, global_step = {}, 0
    for epoch in range(3 * len(epoch_steps)):
        steps = epoch_steps[epoch % len(epoch_steps)]
        for first in range(0, steps, accumulation):
            global_step += 1
            expected[global_step] = (epoch, first, min(first + accumulation, steps) - 1)
    numbering = RunNumbering(epoch_steps, accumulation)
    assert {g: numbering.locate(g) for g in expected} == expected
    assert all(numbering.global_step(epoch, step) == g for g, (epoch, first, last) in expected.items()
               for step in range(first, last + 1))


def test_steps_take_a_trainers_global_step_from_1_across_epochs(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        sampler = OrderSampler(engine, global_batch_size=6, seed=3)
        per_epoch = sampler.steps_per_epoch
        logged = [batch for epoch in (0, 1) for batch in (sampler.set_epoch(epoch), list(sampler))[1]]
    # global step g of a trainer's log read logged[g - 1]: once `dataidx steps g` named epoch 0's
    # step g (from 0), one step late, and past the first epoch nothing
    shown = _steps_json(demo_store, "--global-batch-size", 6, "--seed", 3, f"{per_epoch}-{per_epoch + 1}")
    assert [e["position"] for e in shown] == logged[per_epoch - 1] + logged[per_epoch]
    assert [(e["epoch"], e["global_step"], e["step"]) for e in shown[::6]] == [(0, per_epoch, per_epoch - 1),
                                                                              (1, per_epoch + 1, 0)]
    # with gradient accumulation of 4, a global step is 4 of the sampler's (the epoch's last, what is left)
    shown = _steps_json(demo_store, "--global-batch-size", 6, "--seed", 3, "--gradient-accumulation-steps", 4, "2-3")
    assert [e["position"] for e in shown] == [i for batch in logged[4:per_epoch] + logged[per_epoch:per_epoch + 4]
                                              for i in batch]
    result = _cli("steps", demo_store, "--global-batch-size", 6, "0")
    assert result.exit_code == 1 and "global steps count from 1" in result.output


def test_skip_lists_from_one_runs_log_name_that_runs_entries(demo_copy: Path) -> None:
    with DataEngine(demo_copy) as engine:
        # what each global step of a run that read the order whole read: entries of its batch
        logged = [set(engine.reader.entries_at(batch)) for batch in OrderSampler(engine, global_batch_size=4, seed=2)]

    def skipped(name: str) -> set[int]:
        from dataidx.store import run_query

        return {e for e, in run_query(demo_copy, "SELECT s.entry_id FROM skipped_entries AS s JOIN skip_lists AS l "
                                                 "ON l.id = s.skip_list_id WHERE l.name = :n", {"n": name})[1]}

    assert _cli("skip", demo_copy, "first", "--steps", 2, "--global-batch-size", 4, "--seed", 2,
                "--why", "spike").exit_code == 0
    assert skipped("first") == logged[1]
    # a second list from the same log: counted with "first" in force, its steps would move onto
    # other entries; which lists the run's numbering had is asked, not guessed
    result = _cli("skip", demo_copy, "second", "--steps", 5, "--global-batch-size", 4, "--seed", 2, "--why", "spike")
    assert result.exit_code == 1 and "say which with --numbered-with" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = _cli("skip", demo_copy, "second", "--steps", 5, "--steps", 7, "--global-batch-size", 4, "--seed", 2,
                  "--why", "spike", "--numbered-with", "none")
    assert result.exit_code == 0, result.output
    # a repeated --steps keeps every value (once only the last)
    assert skipped("second") == logged[4] | logged[6]
    assert "global steps 5, 7 (a trainer's global_step: from 1, across epochs) = sampler steps 4, 6 of epoch 0" \
        in result.output and "numbered with skip lists: none" in result.output
    result = _cli("skip", demo_copy, "third", "--steps", 1, "--global-batch-size", 4, "--why", "w",
                  "--numbered-with", "nope")
    assert result.exit_code == 1 and "no skip list 'nope' (skip lists: first, second)" in result.output


def test_a_repeated_steps_option_keeps_every_value(demo_copy: Path) -> None:
    from dataidx.store import run_query

    with DataEngine(demo_copy) as engine:
        batches = list(OrderSampler(engine, global_batch_size=4, seed=2))
        expected = set(engine.reader.entries_at(batches[1] + batches[3]))
    result = _cli("skip", demo_copy, "both", "--epoch", 0, "--steps", 1, "--steps", 3, "--global-batch-size", 4,
                  "--seed", 2, "--why", "spikes")
    assert result.exit_code == 0, result.output
    # once click kept the last --steps only: step 1's entries stayed in the order
    assert {e for e, in run_query(demo_copy, "SELECT entry_id FROM skipped_entries")[1]} == expected


RANK_SCRIPT = """
import json, sys
import torch.distributed as dist
from torch.utils.data import DataLoader
from dataidx import DataEngine, OrderSampler

store, batch, steps, state_in, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
with DataEngine(store) as engine:
    sampler = OrderSampler(engine, global_batch_size=batch, rank=rank, world_size=world, seed=11)
    if state_in != "-":
        sampler.load_state_dict(json.load(open(state_in)))
    read, done, in_epoch = [], 0, 0
    while done < steps:
        in_epoch = 0
        for indices in DataLoader(range(len(engine)), batch_sampler=sampler, num_workers=1, collate_fn=list):
            gathered = [None] * world
            dist.all_gather_object(gathered, indices)  # the global batch, in rank order, on every rank
            read.append([i for share in gathered for i in share])
            done, in_epoch = done + 1, in_epoch + 1
            if done == steps:
                break
        else:
            sampler.set_epoch(sampler.epoch + 1)
    states = [None] * world
    dist.all_gather_object(states, sampler.state_dict(in_epoch))
    assert all(state == states[0] for state in states)
    if rank == 0:
        json.dump({"read": read, "state": states[0]}, open(out, "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_real_torch_distributed_ranks_resume_on_another_world_size(demo_store: Path, tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    state, read = "-", []
    # (world, global batch, steps): 2 ranks, then resumed on 3 with another global batch, past an
    # epoch (each rank a process importing torch: the property test above covers longer chains)
    segments = [(2, 8, 5), (3, 12, 9)]
    for number, (world, batch, steps) in enumerate(segments):
        out = tmp_path / f"segment{number}.json"
        subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}",
                        "--master-port", str(29500 + number + os.getpid() % 1000), str(script), str(demo_store),
                        str(batch), str(steps), state, str(out)], check=True, capture_output=True, timeout=300)
        found = json.loads(out.read_text())
        read += [i for step in found["read"] for i in step]
        state = str(tmp_path / f"state{number}.json")
        Path(state).write_text(json.dumps(found["state"]))
    with DataEngine(demo_store) as engine:
        length = len(engine)
    expected: list[int] = []
    epoch, position = 0, 0
    for _, batch, steps in segments:
        for _ in range(steps):
            if position + batch > length:
                epoch, position = epoch + 1, 0
            expected += TrainingOrder(length, seed=11, epoch=epoch).items(position, position + batch).tolist()
            position += batch
    assert sum(b * s for _, b, s in segments) > length and read == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_checkpoints_the_sampler_and_resumes_on_other_workers(
        demo_store: Path, workers: int) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    with DataEngine(demo_store) as engine:
        numbered = _Numbered(engine)

        def loader(world: int, rank: int, batch: int, workers: int, state: dict | None) -> StatefulDataLoader:
            sampler = OrderSampler(numbered, global_batch_size=batch, rank=rank, world_size=world, seed=4)
            if state is not None:
                sampler.load_state_dict(state)  # a loader's state holds the sampler's: any topology
            return StatefulDataLoader(numbered, batch_sampler=sampler, num_workers=workers, collate_fn=list)

        first = loader(1, 0, 6, workers, None)
        batches = iter(first)
        read = [index for _ in range(3) for index, _ in next(batches)]  # the loader has prefetched past these
        saved = first.state_dict()
        same = StatefulDataLoader(numbered, batch_sampler=OrderSampler(numbered, global_batch_size=6, seed=4),
                                  num_workers=workers, collate_fn=list)
        same.load_state_dict(saved)  # torchdata's own restore, same workers
        assert [index for batch in same for index, _ in batch] == [index for batch in batches for index, _ in batch]
        # on 2 ranks, other workers, a batch of 12: the sampler takes the loader's state
        ranks = [iter(loader(2, rank, 12, 2 - workers, saved)) for rank in (0, 1)]
        read += [index for step in zip(*ranks) for batch in step for index, _ in batch]
        length = len(engine)
        expected = TrainingOrder(length, seed=4).items(0, 18).tolist()
        expected += TrainingOrder(length, seed=4).items(18, 18 + (length - 18) // 12 * 12).tolist()
        assert read == expected


def test_steps_of_a_plan_names_the_members_of_each_pack_read(demo_copy: Path, tiny_tokenizer: Path) -> None:
    from dataidx import PackedDataset
    from dataidx.pack import pack_store
    from dataidx.render import RenderRequest, render_store
    from dataidx.store import run_query

    render_store(RenderRequest(demo_copy, tiny_tokenizer, cutoff=160))
    pack_store(demo_copy, "default", capacity=200, name="p")
    with PackedDataset(demo_copy, plan="p") as packs:
        read = [[i for i in batch] for batch in OrderSampler(packs, global_batch_size=2, seed=5)]
    assert len(read) >= 2
    shown = _steps_json(demo_copy, "--plan", "p", "--global-batch-size", 2, "--seed", 5, "--epoch", 0,
                        f"0-{len(read) - 1}")
    assert sorted({e["pack"] for e in shown}) == sorted(i for step in read for i in step)
    members = ("SELECT e.dataset, e.row, e.cut FROM pack_members AS m JOIN entries AS e ON e.mixture = 'default' "
               "AND e.epoch = m.epoch AND e.position = m.position WHERE m.plan = 'p' AND m.pack = :pack "
               "ORDER BY m.slot")
    for pack in [i for step in read for i in step]:
        expected = [tuple(r) for r in run_query(demo_copy, members, {"pack": pack})[1]]
        assert [(e["dataset"], e["row"], e["cut"]) for e in shown if e["pack"] == pack] == expected
    result = CliRunner().invoke(cli, ["steps", str(demo_copy), "--plan", "p", "--render", "default",
                                      "--global-batch-size", "2", "0"])
    assert result.exit_code == 1 and "give one" in result.output


def _cli(*args: object) -> Any:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def _read_all(dataset: Any, global_batch: int, seed: int = 2, **options: Any) -> list[int]:
    return [i for batch in OrderSampler(dataset, global_batch_size=global_batch, seed=seed, **options) for i in batch]


def test_a_skip_list_leaves_its_entries_out_of_every_order_over_the_mixture(demo_copy: Path) -> None:
    from dataidx.store import run_query

    with DataEngine(demo_copy) as engine:
        whole = _read_all(engine, 1)
        reader = engine.reader
        entry_of = dict(zip(range(len(engine)), reader.entries_at(list(range(len(engine))))))
    result = _cli("skip", demo_copy, "pii", "--entry", "demo_alpaca:3", "--entry", "demo_sharegpt:1:3", "--why",
                  "personal data", "--who", "ana")
    assert result.exit_code == 0, result.output
    skipped_rows = run_query(demo_copy, "SELECT dataset, row, cut, who, why FROM skips ORDER BY dataset, row")[1]
    assert [tuple(r[:2]) for r in skipped_rows] == [("demo_alpaca", 3), ("demo_sharegpt", 1)]
    assert {r[3:] for r in skipped_rows} == {("ana", "personal data")}
    left_out = {entry for entry, in run_query(demo_copy, "SELECT entry_id FROM skipped_entries")[1]}
    with DataEngine(demo_copy) as engine:
        read = _read_all(engine, 1)
        assert read == [i for i in whole if entry_of[i] not in left_out]  # the same order, less those entries
        assert len(read) < len(whole) and len(set(read)) == len(read)
        assert _read_all(engine, 1, skips=False) == whole
    for command in ("info", "compose"):
        said = _cli(command, demo_copy).output
        assert "skip list 'pii': 2 entries left out of its orders, by ana" in said and "personal data" in said
    assert _cli("report", demo_copy, "-o", demo_copy.with_name("r.html")).exit_code == 0
    page = demo_copy.with_name("r.html").read_text()
    assert "Skip lists: entries its training orders leave out" in page and "personal data" in page
    for args, said in (((), "one of them"), (("--entry", "nope:1"), "no dataset 'nope'"),
                       (("--entry", "demo_alpaca:x"), "DATASET:ROW"), (("--entry", "demo_alpaca:3"), "already has")):
        result = _cli("skip", demo_copy, "pii", "--why", "again", *args)
        assert result.exit_code == 1 and said in result.output, result.output
    assert _cli("unskip", demo_copy, "pii").exit_code == 0
    with DataEngine(demo_copy) as engine:
        assert _read_all(engine, 1) == whole
    assert "no skip list 'pii'" in _cli("unskip", demo_copy, "pii").output


def test_a_run_resumed_after_a_skip_list_continues_where_it_stopped_without_the_skipped(demo_copy: Path) -> None:
    with DataEngine(demo_copy) as engine:
        sampler = OrderSampler(engine, global_batch_size=6, seed=9)
        batches = iter(sampler)
        read = [i for _ in range(2) for i in next(batches)]
        state = sampler.state_dict(2)
        rest_whole = [i for batch in batches for i in batch]
    # a loss spike in step 1 (from 0): skip its entries (already read), and entries of step 4 (not yet read)
    spike = _cli("skip", demo_copy, "spike", "--epoch", 0, "--steps", "1", "--global-batch-size", 6, "--seed", 9,
                 "--why", "spike")
    assert spike.exit_code == 0, spike.output
    with DataEngine(demo_copy) as engine:
        ahead = engine.reader.entries_at(rest_whole[12:14])  # two items the run has not read yet
        dataset_rows = engine.reader.triples(rest_whole[12:14])
        names = {i: d.name for i, d in engine.reader.datasets.items()}
    later = _cli("skip", demo_copy, "later", *[a for d, row, cut in dataset_rows
                                               for a in ("--entry", f"{names[d]}:{row}:{cut}")], "--why", "bad")
    assert later.exit_code == 0, later.output
    with DataEngine(demo_copy) as engine:
        resumed = OrderSampler(engine, global_batch_size=6, seed=9)
        resumed.load_state_dict(state)
        after = [i for batch in resumed for i in batch]
        holding = set(engine.reader.skipped_items().tolist())
        assert set(ahead) and not holding.isdisjoint(rest_whole[12:14])
        expected = [i for i in _rest(engine, 9, state) if i not in holding]
        # nothing read twice, the skipped left out, the rest in the same order; the tail trims anew
        assert after == expected[: len(expected) // 6 * 6] and not set(after) & set(read)
        # steps count with the lists in force: later steps moved forward to fill the gaps
        fresh = _read_all(engine, 6, seed=9)
    shown = _steps_json(demo_copy, "--global-batch-size", 6, "--seed", 9, "--epoch", 0, f"0-{len(fresh) // 6 - 1}")
    assert [e["position"] for e in shown] == fresh
    whole = _steps_json(demo_copy, "--global-batch-size", 6, "--seed", 9, "--no-skips", "--epoch", 0, "0-1")
    assert [e["position"] for e in whole] == read  # the order the run read before the lists


def _rest(engine: DataEngine, seed: int, state: dict[str, Any]) -> list[int]:
    """The whole order from a state's position on (no skip list applied), as items."""
    order = TrainingOrder(len(engine), seed=seed, epoch=state["epoch"])
    return order.items(state["position"], len(engine)).tolist()


def test_skip_lists_leave_out_training_entries_of_a_spec_and_packs_of_a_plan(demo_copy: Path,
                                                                            tiny_tokenizer: Path) -> None:
    from dataidx import PackedDataset
    from dataidx.pack import pack_store
    from dataidx.render import RenderRequest, render_store

    render_store(RenderRequest(demo_copy, tiny_tokenizer, cutoff=160))
    pack_store(demo_copy, "default", capacity=200, name="p")
    assert _cli("skip", demo_copy, "rows", "--entry", "demo_alpaca:2", "--entry", "demo_sharegpt:0",
                "--why", "bad").exit_code == 0
    with DataEngine(demo_copy, render="default") as engine:
        positions = engine.reader.positions_at(list(range(len(engine))))
        entries = engine.reader.reader.entries_at(positions)
        skipped = {e for e, (d, row, _) in zip(entries, engine.reader.reader.triples(positions))
                   if (engine.reader.reader.datasets[d].name, row) in {("demo_alpaca", 2), ("demo_sharegpt", 0)}}
        read = _read_all(engine, 1)
        assert skipped and sorted(read) == [i for i, e in enumerate(entries) if e not in skipped]
    with PackedDataset(demo_copy, plan="p") as packs:
        left_out = set(packs.skipped_items().tolist())
        assert left_out and all(set(packs.packs.member_entries(p)) & skipped for p in left_out)
        assert sorted(_read_all(packs, 1)) == [p for p in range(len(packs)) if p not in left_out]


def documented(doc: str, marker: str) -> dict[str, Any]:
    """What the first Python block after ``marker`` in ``docs/<doc>`` defines, run as written."""
    from .helpers import REPO

    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    block = text[text.index(marker):].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, f"docs/{doc}", "exec"), namespace)
    return namespace


def _tiny_llama(vocabulary: int, scale: float = 0.02) -> Any:
    """A random 1-layer Llama built from a config, small enough for a CPU Trainer run; ``scale``
    its weights' spread (a wider one makes tokens' losses differ more)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocabulary, hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                        max_position_embeddings=512, initializer_range=scale))


@pytest.mark.slow
def test_a_transformers_trainer_resumes_the_order_from_its_checkpoint(demo_store: Path, tiny_tokenizer: Path,
                                                                      tmp_path: Path) -> None:
    """The recipe of docs/training-orders.md as written: the resumed run reads the batches an
    uninterrupted one reads, and logs the epochs its sampler has read (once it logged 0.14 for the
    first step after a resume at 3 of 7)."""
    from transformers import AutoTokenizer, TrainingArguments

    from dataidx import Collator
    from dataidx.render import RenderRequest, render_store

    recipe = documented("training-orders.md", "**transformers.Trainer**")
    store = Path(shutil.copyfile(demo_store, tmp_path / "demo.db"))
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=256))
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer)
    collate = Collator(pad_token_id=tokenizer.pad_token_id)
    seen: list[list[int]] = []

    def spy(batch: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append([sum(sample["input_ids"]) for sample in batch])
        return collate(batch)

    def run(max_steps: int, checkpoint: str | None) -> list[float]:
        with DataEngine(store, render="default") as engine:
            sampler = OrderSampler(engine, global_batch_size=4, seed=3)
            if checkpoint:
                sampler.load_state_dict(json.loads((Path(checkpoint) / "dataidx_order.json").read_text()))
            arguments = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=max_steps, save_steps=3,
                                          per_device_train_batch_size=4, report_to=[], use_cpu=True, logging_steps=1,
                                          disable_tqdm=True, remove_unused_columns=False, ignore_data_skip=True)
            trainer = recipe["OrderTrainer"](model=_tiny_llama(len(tokenizer)), args=arguments, train_dataset=engine,
                                             data_collator=spy, sampler=sampler)
            trainer.train(resume_from_checkpoint=checkpoint)
        return [entry["epoch"] for entry in trainer.state.log_history if "loss" in entry]

    run(3, None)
    epochs = run(6, str(tmp_path / "out" / "checkpoint-3"))
    with DataEngine(store, render="default") as engine:
        sampler = OrderSampler(engine, global_batch_size=4, seed=3)
        order = [[sum(engine[i]["input_ids"]) for i in batch] for epoch in (0, 1)
                 for batch in (sampler.set_epoch(epoch), list(sampler))[1]]
        steps = sampler.steps_per_epoch
    assert steps < 6  # the run crossed an epoch's end
    assert seen == order[:6]
    assert epochs == pytest.approx([(step - 1) // steps + ((step - 1) % steps + 1) / steps for step in range(1, 7)])


def _weighted_store(tmp_path: Path, tokenizer: Path) -> Path:
    """A rendered store of conversations whose answers weigh 1, 0.5 or 0.25 (v1's per-message
    ``loss_weight``): a batch's weighted mean differs from its plain mean over tokens."""
    from dataidx.index import build
    from dataidx.render import RenderRequest, render_store

    from .helpers import write_jsonl, write_yaml

    def text(role: str, value: str, weight: float) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "value": value}], "loss_weight": weight}

    rows = [{"messages": [text("user", f"hello {i}, how are you today?", 0.0),
                          text("assistant", "I am fine, thanks. " * (1 + i % 3), [1.0, 0.5, 0.25][i % 3])]}
            for i in range(12)]
    data = write_jsonl(tmp_path / "weighted.jsonl", rows)
    build(write_yaml(tmp_path / "weighted.yaml", f"weighted:\n  path: {data}\n  source: local\n"),
          tmp_path / "weighted.db")
    render_store(RenderRequest(tmp_path / "weighted.db", tokenizer, cutoff=256))
    return tmp_path / "weighted.db"


@pytest.mark.slow
def test_the_documented_trainer_recipe_trains_v1s_weighted_loss(tiny_tokenizer: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Once the recipe trained the model's own loss, which reads labels only: answers weighted 0.25
    trained at 1. Its first logged loss is v1's, sum(w * token loss) / sum(w), computed here by
    hand from the same batch and model, alone and as two batches of a gradient accumulation."""
    from transformers import AutoTokenizer, TrainingArguments

    from dataidx import Collator

    monkeypatch.setattr("dataidx.training.collate._said_unweighted", False)
    recipe = documented("training-orders.md", "**transformers.Trainer**")
    store = _weighted_store(tmp_path, tiny_tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer)
    collate = Collator(pad_token_id=tokenizer.pad_token_id, weighted=True)

    def by_hand(batch: dict[str, Any]) -> tuple[float, float, int]:
        """v1's loss of a batch, the model's own (every supervised token at 1), and its tokens."""
        labels, weights = batch["labels"][:, 1:], batch["loss_weights"][:, 1:]
        with torch.no_grad():
            logits = _tiny_llama(len(tokenizer), 1.0)(input_ids=batch["input_ids"],
                                                 attention_mask=batch["attention_mask"]).logits[:, :-1]
        losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100,
                                                   reduction="none")
        supervised = labels.flatten() != -100
        return (float((losses * weights.flatten()).sum() / (weights.sum() + 1e-6)),
                float(losses[supervised].mean()), int(supervised.sum()))

    def first_loss(per_device: int, accumulation: int) -> float:
        with DataEngine(store, render="default") as engine:
            sampler = OrderSampler(engine, global_batch_size=per_device, seed=0)
            arguments = TrainingArguments(output_dir=str(tmp_path / f"out{accumulation}"), max_steps=1,
                                          per_device_train_batch_size=per_device,
                                          gradient_accumulation_steps=accumulation, report_to=[], use_cpu=True,
                                          logging_steps=1, save_strategy="no", disable_tqdm=True,
                                          remove_unused_columns=False, ignore_data_skip=True)
            trainer = recipe["OrderTrainer"](model=_tiny_llama(len(tokenizer), 1.0), args=arguments,
                                             train_dataset=engine,
                                             data_collator=Collator(pad_token_id=tokenizer.pad_token_id),
                                             sampler=sampler)
            trainer.train()
        return next(entry["loss"] for entry in trainer.state.log_history if "loss" in entry)

    with DataEngine(store, render="default") as engine:
        batches = [collate([engine[i] for i in batch]) for batch in OrderSampler(engine, global_batch_size=2, seed=0)]
        weighted, own, _ = by_hand(collate([engine[i] for i in next(iter(OrderSampler(engine, global_batch_size=4,
                                                                                        seed=0)))]))
    assert {w for b in batches for w in b["loss_weights"].flatten().tolist()} == {0.0, 0.25, 0.5, 1.0}
    assert abs(weighted - own) > 5e-3 * weighted  # the two losses differ on this batch by 5 times the tolerance
    assert first_loss(4, 1) == pytest.approx(weighted, rel=1e-5)
    # v1 weighs a step's micro-batches by their share of its supervised tokens (core/base_trainer.py)
    (first, first_tokens), (second, second_tokens) = [(loss, tokens) for loss, _, tokens in map(by_hand, batches[:2])]
    step = (first * first_tokens + second * second_tokens) / (first_tokens + second_tokens)
    assert first_loss(2, 2) == pytest.approx(step, rel=1e-5)
    assert "trains them at 1" not in caplog.text  # WeightedLoss told its Collator the weights are read


def test_a_recorded_order_shows_what_each_epoch_tail_trims_in_sql(tmp_path: Path) -> None:
    from dataidx.index import add_mixture, build
    from dataidx.store import run_query

    from .helpers import REPO

    store = tmp_path / "demo.db"
    build(REPO / "data" / "demo_sft.yaml", store)
    add_mixture(store, REPO / "data" / "demo_sft.yaml", "three", seed=4, epochs=3)
    result = _cli("order", store, "run-7", "--mixture", "three", "--global-batch-size", 8, "--seed", 5)
    assert result.exit_code == 0, result.output
    with DataEngine(store, "three") as engine:
        sampler = OrderSampler(engine, global_batch_size=8, seed=5)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            read = {i for batch in sampler for i in batch}
            tail = sorted(set(range(len(engine))) - read)
            expected = sorted(set(engine.reader.entries_at(tail)))
            found = run_query(store, "SELECT t.entry_id FROM order_trims AS t JOIN training_orders AS o "
                                     "ON o.id = t.order_id WHERE o.name = 'run-7' AND t.epoch = :epoch "
                                     "ORDER BY t.entry_id", {"epoch": epoch})[1]
            assert [e for e, in found] == expected and len(tail) == len(engine) % 8
    said = run_query(store, "SELECT \"order\", epoch, dataset, global_batch_size, seed FROM trimmed LIMIT 1")[1]
    assert said and said[0][0] == "run-7" and said[0][3:] == (8, 5)
    info = _cli("info", store).output
    assert "order 'run-7': the mixture, seed 5, global batch 8, trim; steps per epoch" in info
    assert "already" in _cli("order", store, "run-7", "--mixture", "three", "--global-batch-size", 8).output
    assert _cli("remove-mixture", store, "three").exit_code == 0
    assert run_query(store, "SELECT count(*) FROM order_trims")[1] == [(0,)]


def test_stored_steps_answer_which_entries_a_step_read_in_sql(demo_copy: Path, tiny_tokenizer: Path) -> None:
    from dataidx.pack import pack_store
    from dataidx.render import RenderRequest, render_store
    from dataidx.store import run_query

    render_store(RenderRequest(demo_copy, tiny_tokenizer, cutoff=160))
    pack_store(demo_copy, "default", capacity=200, name="p")
    for name, reads in (("run-m", ()), ("run-s", ("--render", "default")), ("run-p", ("--plan", "p"))):
        batch = 2 if reads and reads[0] == "--plan" else 6
        result = _cli("order", demo_copy, name, "--global-batch-size", batch, "--seed", 1, "--store-steps", *reads)
        assert result.exit_code == 0 and "step entries stored" in result.output, result.output
        shown = _steps_json(demo_copy, "--global-batch-size", batch, "--seed", 1, "--epoch", 0, "0-1", *reads)
        stored = run_query(demo_copy, "SELECT step, item, dataset, row, cut FROM order_steps WHERE \"order\" = :n "
                                      "AND epoch = 0 AND step <= 1", {"n": name})[1]
        key = "pack" if reads and reads[0] == "--plan" else "position"
        assert stored and [tuple(r) for r in stored] == [(e["step"], e[key], e["dataset"], e["row"], e["cut"])
                                                         for e in shown]
    assert _cli("remove-plan", demo_copy, "p").exit_code == 0  # its orders go with it
    assert run_query(demo_copy, "SELECT DISTINCT \"order\" FROM order_steps ORDER BY 1")[1] == [("run-m",), ("run-s",)]


@pytest.mark.slow
def test_dataidx_steps_loads_neither_sqlalchemy_nor_pyarrow_nor_the_converters(demo_store: Path) -> None:
    # It names entries from the store alone: SQLAlchemy came in through a constant of the ORM
    # tables and pyarrow through dataidx.read (~460 ms of imports for a 4 ms answer).
    code = ("import runpy, sys; sys.argv = ['dataidx', 'steps', sys.argv[1], '--global-batch-size', '4', '2', "
            "'--json']\n"
            "try:\n    runpy.run_module('dataidx', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('sqlalchemy', 'pyarrow', 'torch', 'dataidx.convert', 'dataidx.sources') "
            "if m in sys.modules], file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(demo_store)], capture_output=True, text=True, check=True)
    assert len([json.loads(line) for line in done.stdout.splitlines()]) == 4  # the step's entries
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_info_of_a_store_with_skip_lists_and_orders_stays_light(demo_copy: Path) -> None:
    # dataidx info reads a store through its own read path: skip lists and orders must not bring
    # SQLAlchemy, NumPy or torch in (once they did: 0.1 s became 0.4 s).
    assert _cli("skip", demo_copy, "s", "--entry", "demo_alpaca:1", "--why", "w").exit_code == 0
    assert _cli("order", demo_copy, "o", "--global-batch-size", 4).exit_code == 0
    code = ("import runpy, sys; sys.argv = ['dataidx', 'info', sys.argv[1]]\n"
            "try:\n    runpy.run_module('dataidx', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('sqlalchemy', 'numpy', 'torch') if m in sys.modules], file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(demo_copy)], capture_output=True, text=True, check=True)
    assert "skip list 's'" in done.stdout and "order 'o'" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"

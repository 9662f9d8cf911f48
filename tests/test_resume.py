"""Exact resume with torchdata's StatefulDataLoader and StatefulDistributedSampler (what
LLaMA-Factory v1's BatchGenerator uses): a run stopped after k batches and restored in a new
process reads exactly the batches an uninterrupted run reads, on 1, 2 and 4 ranks, over plain,
rendered and packed datasets, with the same or another number of workers after the restore. And
workers forked after the parent has read from the store read the right rows."""

from __future__ import annotations

import pickle
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

from dataidx import Collator, DataEngine, PackedDataset, loader_state_for_workers
from dataidx.errors import UsageError
from dataidx.index import build
from dataidx.pack import pack_store
from dataidx.render import RenderRequest, render_store

from .helpers import REPO, alpaca_rows, chat_rows, write_jsonl

pytest.importorskip("torchdata")
pytest.importorskip("transformers")

from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

# torchdata 0.11 calls a torch API that torch deprecated; nothing dataidx can change.
pytestmark = [pytest.mark.slow,  # loaders stopped and restored in new processes
              pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")]

KINDS = ("samples", "rendered", "packed")
STOP_AFTER = 3
# (ranks, workers before the stop, workers after the restore): every rank of each is resumed.
CASES = [(1, 2, 2), (1, 2, 0), (2, 0, 2), (2, 2, 1), (2, 1, 3), (4, 0, 0)]


def dataset(store: Path, kind: str) -> Any:
    if kind == "samples":
        return DataEngine(store)
    if kind == "rendered":
        return DataEngine(store, render="default")
    return PackedDataset(store, plan="default")


def make_loader(stack: ExitStack, store: Path, kind: str, rank: int, ranks: int, workers: int) -> StatefulDataLoader:
    """A loader of ``kind`` for ``rank`` of ``ranks``; its dataset is closed when ``stack`` unwinds."""
    data = stack.enter_context(dataset(store, kind))
    sampler = StatefulDistributedSampler(data, num_replicas=ranks, rank=rank, shuffle=True, seed=7, drop_last=True)
    return StatefulDataLoader(data, batch_size=2, sampler=sampler, num_workers=workers,
                              collate_fn=list if kind == "samples" else Collator(pad_token_id=0),
                              multiprocessing_context="fork" if workers else None)


def comparable(batch: Any) -> Any:
    """A batch with tensors as lists, so batches compare with ``==``."""
    if isinstance(batch, dict):
        return {key: comparable(value) for key, value in batch.items()}
    if isinstance(batch, list):
        return [comparable(item) for item in batch]
    return batch.tolist() if isinstance(batch, torch.Tensor) else batch


def resume_in_this_process(jobs: Path, results: Path) -> None:
    """The new process: restore every saved state and read the rest of each run."""
    rests = []
    with ExitStack() as stack:
        for store, kind, rank, ranks, workers, state in pickle.loads(jobs.read_bytes()):
            loader = make_loader(stack, store, kind, rank, ranks, workers)
            loader.load_state_dict(loader_state_for_workers(state, workers))
            rests.append([comparable(batch) for batch in loader])
    results.write_bytes(pickle.dumps(rests))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    folder = tmp_path_factory.mktemp("resume")
    write_jsonl(folder / "qa.jsonl", alpaca_rows(120))
    write_jsonl(folder / "chat.jsonl", chat_rows([1, 2, 3] * 6))
    (folder / "config.yaml").write_text(
        f"qa:\n  path: {folder / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n"
        f"chat:\n  path: {folder / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n")
    build(folder / "config.yaml", folder / "resume.db")
    render_store(RenderRequest(folder / "resume.db", tiny_tokenizer, cutoff=256))
    pack_store(folder / "resume.db", spec="default", capacity=128)
    return folder / "resume.db"


def test_a_run_stopped_and_restored_in_a_new_process_reads_the_same_batches(store: Path, tmp_path: Path,
                                                                           exit_stack: ExitStack) -> None:
    jobs, expected = [], []
    for kind in KINDS:
        for ranks, before, after in CASES:
            for rank in range(ranks):
                # the uninterrupted run read in this process: its order is the same with any workers
                whole = [comparable(batch) for batch in make_loader(exit_stack, store, kind, rank, ranks, 0)]
                assert len(whole) > STOP_AFTER
                stopped = make_loader(exit_stack, store, kind, rank, ranks, before)
                batches = iter(stopped)
                assert [comparable(next(batches)) for _ in range(STOP_AFTER)] == whole[:STOP_AFTER]
                jobs.append((store, kind, rank, ranks, after, stopped.state_dict()))
                expected.append(whole[STOP_AFTER:])
                del batches
    (tmp_path / "jobs.pkl").write_bytes(pickle.dumps(jobs))
    code = ("import sys; from pathlib import Path; from tests.test_resume import resume_in_this_process; "
            "resume_in_this_process(Path(sys.argv[1]), Path(sys.argv[2]))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "jobs.pkl"), str(tmp_path / "rests.pkl")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rests = pickle.loads((tmp_path / "rests.pkl").read_bytes())
    assert len(rests) == len(expected) == 3 * sum(ranks for ranks, _, _ in CASES)
    for job, rest, wanted in zip(jobs, rests, expected):
        assert rest == wanted, job[1:5]


def test_ranks_split_an_epoch_without_overlap(store: Path) -> None:
    with DataEngine(store) as engine:
        seen = []
        for rank in range(4):
            sampler = StatefulDistributedSampler(engine, num_replicas=4, rank=rank, shuffle=True, seed=7,
                                                 drop_last=True)
            seen += list(sampler)
        assert len(seen) == len(set(seen)) == len(engine) // 4 * 4


def test_a_loader_state_changes_its_number_of_workers_only_when_it_can() -> None:
    with pytest.raises(UsageError, match="not a StatefulDataLoader state_dict"):
        loader_state_for_workers({"something": 1}, 2)
    saved = {"_snapshot": {"_snapshot_step": 4, "_main_snapshot": {}, "_worker_snapshots": {}},
             "_steps_since_snapshot": 2, "_iterator_finished": False}
    with pytest.raises(UsageError, match="snapshot_every_n_steps=1"):
        loader_state_for_workers(saved, 0)


@pytest.mark.parametrize("kind", KINDS)
def test_workers_forked_after_the_parent_read_the_store_read_the_right_rows(store: Path, kind: str) -> None:
    with dataset(store, kind) as data:
        expected = [comparable(data[i]) for i in range(len(data))]  # the parent's connection and rows are open
        loader = DataLoader(data, batch_size=3, num_workers=2, multiprocessing_context="fork",
                            collate_fn=list)
        assert [comparable(item) for batch in loader for item in batch] == expected
        assert comparable(data[0]) == expected[0]  # and the parent's connection survived its workers

"""DataEngine: v1's dicts by rowid, index types, DataLoader workers, staleness, lazy imports."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from dataidx import DataEngine
from dataidx.errors import StaleStoreError, StoreError
from dataidx.index import build
from dataidx.read import StoreReader
from dataidx.store import store_info

from .helpers import alpaca_rows, chat_rows, engine_length, engine_samples, write_jsonl, write_yaml


@pytest.fixture
def chat_store(tmp_path: Path, make_store) -> Path:
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows([2, 1, 3, 1]))
    return make_store(f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n")


def user_texts(samples: list[dict]) -> list[str]:
    return [s["messages"][-1]["content"][0]["value"] for s in samples]


def test_int_negative_slice_list_and_errors(chat_store: Path) -> None:
    with DataEngine(chat_store) as engine:
        assert len(engine) == 7
        first = engine[0]
        assert first == {
            "_dataset_name": "chat",
            "messages": [
                {"role": "user", "content": [{"type": "text", "value": "q0.0"}], "loss_weight": 0.0},
                {"role": "assistant", "content": [{"type": "text", "value": "a0.0"}], "loss_weight": 1.0},
            ],
        }
        assert len(engine[1]["messages"]) == 4
        assert engine[-1] == engine[6]
        assert user_texts(engine[2:6:2]) == ["a1.0", "a2.1"]
        assert user_texts(engine[[6, 0, 6]]) == ["a3.0", "a0.0", "a3.0"]
        assert engine[[]] == []
        with pytest.raises(IndexError, match="position 7 out of range"):
            engine[7]
        with pytest.raises(IndexError):
            engine[-8]
        with pytest.raises(IndexError):
            engine[[0, 99]]
        for bad in ("0", 1.0, (0, 1), True, [0, "1"]):
            with pytest.raises(TypeError):
                engine[bad]


def test_what_llamafactory_v1s_trainers_read_from_their_dataset(chat_store: Path) -> None:
    # Its DPO and RM trainers check, in this order: not streaming, not empty, the first sample.
    with DataEngine(chat_store) as engine:
        assert engine.streaming is False and len(engine) > 0 and "messages" in engine[0]


def test_getitems_matches_getitem(chat_store: Path) -> None:
    with DataEngine(chat_store) as engine:
        order = [5, 3, 3, -1, 0]
        assert engine.__getitems__(order) == [engine[i] for i in order]


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_with_two_workers(chat_store: Path, context: str) -> None:
    with DataEngine(chat_store) as engine:
        loader = DataLoader(engine, batch_size=3, num_workers=2, collate_fn=list, multiprocessing_context=context)
        fetched = [sample for batch in loader for sample in batch]
        assert fetched == [engine[i] for i in range(len(engine))]


def test_pickles_without_open_handles(chat_store: Path) -> None:
    with DataEngine(chat_store) as engine:
        engine[0]
        with pickle.loads(pickle.dumps(engine)) as clone:  # a copy in this process opens a handle of its own
            assert clone[3] == engine[3]
            assert len(clone) == len(engine)


def test_missing_arrow_cache_reloads_the_source(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(6))
    store = make_store(f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    expected = engine_samples(store)
    for path in store_info(store)["datasets"][0]["arrow_files"]:
        shutil.rmtree(Path(path).parent)
    assert engine_samples(store) == expected


def test_unknown_mixture_lists_the_mixtures(chat_store: Path) -> None:
    with pytest.raises(StoreError, match=r"no mixture 'other' \(mixtures: default\)"):
        DataEngine(chat_store, mixture="other")


@pytest.mark.slow
def test_open_and_fetch_never_import_datasets(chat_store: Path) -> None:
    """Opening maps the recorded Arrow files; it must not call load_dataset (or import datasets),
    nor pandas, which pyarrow's first ``pa.array`` imports (0.4 s of every reading command)."""
    script = (
        "import sys, time, json; t = time.perf_counter()\n"
        "from dataidx.read import StoreReader\n"
        f"r = StoreReader({str(chat_store)!r}); s = r.get(0); r.get_many([1, 2])\n"
        "print(json.dumps({m: m in sys.modules for m in ('datasets', 'torch', 'pandas')}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env={**os.environ})
    assert json.loads(result.stdout) == {"datasets": False, "torch": False, "pandas": False}


def test_reader_matches_engine(chat_store: Path) -> None:
    with StoreReader(chat_store) as reader:
        with DataEngine(chat_store) as engine:
            assert [reader.get(i) for i in range(len(reader))] == engine[:]
            assert reader.entry(2) == ("chat", 1, 2)
            assert reader.entry(-1) == ("chat", 3, 2)
            assert isinstance(engine, torch.utils.data.Dataset)


def test_a_worker_never_reads_a_store_replaced_after_the_engine_opened(tmp_path: Path, alpaca3k_store: Path) -> None:
    with DataEngine(alpaca3k_store) as engine:
        clone = pickle.loads(pickle.dumps(engine))  # what a spawned DataLoader worker receives
        config = write_yaml(tmp_path / "b.yaml", f"alp:\n  path: {tmp_path / 'a.jsonl'}\n  source: local\n"
                                                 "  converter: alpaca\n  size: 5\n")
        build(config, alpaca3k_store)
        assert engine[0]["_dataset_name"] == "alp"  # the opening process keeps its file
        with pytest.raises(StaleStoreError, match="the store was rebuilt after this reader opened it; open it again"):
            clone[0]
        assert engine_length(alpaca3k_store) == 5


def test_numpy_and_torch_integers_index_the_engine(alpaca3k_store: Path) -> None:
    with DataEngine(alpaca3k_store) as engine:
        expected = engine[[3, 1]]
        assert engine[np.int64(3)] == expected[0]
        assert engine[torch.tensor(1)] == expected[1]
        assert engine[[np.int64(3), np.int32(1)]] == expected
        assert engine.__getitems__(np.array([3, 1])) == expected
        with pytest.raises(TypeError):
            engine[1.5]


@pytest.mark.slow
def test_threads_reading_one_engine_get_the_right_rows(alpaca3k_store: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with DataEngine(alpaca3k_store) as engine:
        positions = list(range(0, 3000, 7))
        every = engine_samples(alpaca3k_store)
        expected = [every[p] for p in positions]
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(engine.reader.get, positions)) == expected

"""Races and edge cases: concurrent writers, replaced stores, NumPy indices, odd configs."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.config import load_config
from dataidx.errors import ConfigError, DataidxError, StaleStoreError
from dataidx.index import add_mixture, build
from dataidx.store import store_info

from .conftest import alpaca_rows, write_jsonl, write_yaml


@pytest.fixture
def store(tmp_path: Path, make_store) -> Path:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3000))
    return make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")


def test_concurrent_mixes_both_land(tmp_path: Path, store: Path) -> None:
    config = write_yaml(tmp_path / "m.yaml", f"alp:\n  path: {tmp_path / 'a.jsonl'}\n  weight: 300\n")
    processes = [
        subprocess.Popen([sys.executable, "-m", "dataidx", "mix", str(store), str(config), "--name", name],
                         stderr=subprocess.PIPE, env=os.environ.copy())
        for name in ("first", "second", "third")
    ]
    assert [p.wait() for p in processes] == [0, 0, 0]
    assert sorted(m["name"] for m in store_info(store)["mixtures"]) == ["default", "first", "second", "third"]
    assert all(len(DataEngine(store, mixture=name)) == 900_000 for name in ("first", "second", "third"))


def test_a_worker_never_reads_a_store_replaced_after_the_engine_opened(tmp_path: Path, store: Path) -> None:
    engine = DataEngine(store)
    clone = pickle.loads(pickle.dumps(engine))  # what a spawned DataLoader worker receives
    config = write_yaml(tmp_path / "b.yaml", f"alp:\n  path: {tmp_path / 'a.jsonl'}\n  source: local\n"
                                             "  converter: alpaca\n  size: 5\n")
    build(config, store)
    assert engine[0]["_dataset_name"] == "alp"  # the opening process keeps its file
    with pytest.raises(StaleStoreError, match="the store was replaced .* open it again"):
        clone[0]
    assert len(DataEngine(store)) == 5


def test_numpy_and_torch_integers_index_the_engine(store: Path) -> None:
    engine = DataEngine(store)
    expected = engine[[3, 1]]
    assert engine[np.int64(3)] == expected[0]
    assert engine[torch.tensor(1)] == expected[1]
    assert engine[[np.int64(3), np.int32(1)]] == expected
    assert engine.__getitems__(np.array([3, 1])) == expected
    with pytest.raises(TypeError):
        engine[1.5]


def test_build_refuses_to_overwrite_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    config = write_yaml(tmp_path / "c.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    before = data.read_bytes()
    result = CliRunner().invoke(cli, ["build", str(config), "-o", str(data)])
    assert result.exit_code == 1 and "exists and is not a dataidx store; refusing to overwrite it" in result.stderr
    assert data.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a:\n  path: x\n  weight: .inf\n", "key 'weight' must be a finite number >= 0, got inf"),
        ("a:\n  path: x\n  weight: .nan\n", "key 'weight' must be a finite number >= 0, got nan"),
        ("1:\n  path: x\n'1':\n  path: y\n", "dataset '1': the name appears more than once"),
    ],
)
def test_more_config_mistakes(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_config(write_yaml(tmp_path / "c.yaml", text))


def test_a_yaml_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a:\n  path: \xff\xfe\n")
    result = CliRunner().invoke(cli, ["build", str(path), "-o", str(tmp_path / "s.db")])
    assert result.exit_code == 1 and "not UTF-8 text" in result.stderr and "Traceback" not in result.stderr


def test_mix_reads_names_sizes_weights_only_and_checks_the_seed(tmp_path: Path, store: Path) -> None:
    custom = write_yaml(tmp_path / "m.yaml", "alp:\n  path: moved\n  converter: someone_elses_plugin\n  size: 7\n")
    assert add_mixture(store, custom, "small").entries == 7
    with pytest.raises(DataidxError, match="does not fit in 64 bits"):
        add_mixture(store, custom, "huge", seed=2**64)


def test_writes_in_a_read_only_folder_are_one_line(tmp_path: Path, store: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; simulate the same failure with a folder that is gone
        result = CliRunner().invoke(cli, ["remove-mixture", str(tmp_path / "gone" / "s.db"), "default"])
        assert result.exit_code == 1 and "store not found" in result.stderr
        return
    os.chmod(tmp_path, 0o555)
    try:
        result = CliRunner().invoke(cli, ["remove-mixture", str(store), "default"])
        assert result.exit_code == 1 and "is not writable" in result.stderr
    finally:
        os.chmod(tmp_path, 0o755)


def test_files_in_subfolders_count_as_sources(tmp_path: Path, make_store) -> None:
    folder = tmp_path / "parts"
    write_jsonl(folder / "a" / "p0.jsonl", alpaca_rows(3))
    write_jsonl(folder / "b" / "p1.jsonl", alpaca_rows(2))
    built = make_store(f"f:\n  path: {folder}\n  source: local\n  converter: alpaca\n")
    assert len(DataEngine(built)) == 5
    assert len(store_info(built)["datasets"][0]["files"]) == 2
    write_jsonl(folder / "b" / "p1.jsonl", alpaca_rows(4))
    with pytest.raises(StaleStoreError, match="p1.jsonl changed size"):
        DataEngine(built)
    assert json.loads(CliRunner().invoke(cli, ["verify", str(built), "--json"]).output)["ok"] is False


def test_threads_reading_one_engine_get_the_right_rows(store: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = DataEngine(store)
    positions = list(range(0, 3000, 7))
    expected = [DataEngine(store)[p] for p in positions]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(engine.reader.get, positions)) == expected


def test_a_source_rewritten_with_its_mtime_put_back_is_loaded_again(tmp_path: Path) -> None:
    """datasets caches local files by path and mtime; dataidx notices the change time moved."""
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    config = write_yaml(tmp_path / "c.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    build(config, tmp_path / "s.db")
    build(config, tmp_path / "old.db")
    stat = data.stat()
    data.write_bytes(data.read_bytes().replace(b"answer 1", b"answer 9"))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    build(config, tmp_path / "s.db")
    # The older store indexed the cache that has just been written anew: refused, not misread.
    with pytest.raises(StaleStoreError, match="the Arrow data recorded at build time was written anew; rebuild the store"):
        DataEngine(tmp_path / "old.db")
    assert DataEngine(tmp_path / "s.db")[1]["messages"][1]["content"][0]["value"] == "answer 9"
    assert json.loads(CliRunner().invoke(cli, ["verify", str(tmp_path / "s.db"), "--json"]).output)["ok"] is True

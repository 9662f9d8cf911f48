"""DataEngine takes what LLaMA-Factory v1's takes: a local data file or folder, a hub dataset id
and a YAML in a hub repo, each built into the cache once; offline, a hub name not cached is one
line at once. The hub is a Hugging Face cache laid out in a temp folder (the tests run with
HF_HUB_OFFLINE=1, see conftest), read through huggingface_hub as dataidx reads it."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from huggingface_hub import constants

from dataidx import DataEngine
from dataidx.errors import StoreError

from .helpers import write_jsonl, write_yaml


def messages_rows(n: int) -> list[dict]:
    """Rows already in v1's standard format: v1 loads a bare file with no converter."""
    def turn(role: str, text: str, weight: float) -> dict:
        return {"role": role, "content": [{"type": "text", "value": text}], "loss_weight": weight}
    return [{"messages": [turn("user", f"question {i}", 0.0), turn("assistant", f"answer {i}", 1.0)]}
            for i in range(n)]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATAIDX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face hub cache that huggingface_hub reads from."""
    folder = tmp_path / "hf-hub"
    folder.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))
    return folder


def cached_repo(hub: Path, repo: str, files: dict[str, str]) -> Path:
    """Lay ``files`` out as huggingface_hub caches a dataset repo: a snapshot and refs/main."""
    root = hub / f"datasets--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    for name, text in files.items():
        write_yaml(snapshot / name, text)
    write_yaml(root / "refs" / "main", snapshot.name)
    return snapshot


def test_a_local_jsonl_file_is_one_dataset_built_once(tmp_path: Path, cache: Path, caplog) -> None:
    data = write_jsonl(tmp_path / "qa.jsonl", messages_rows(6))
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(data) as engine:
        assert len(engine) == 6 and engine[0]["_dataset_name"] == "default"
        assert engine[2]["messages"][1]["content"][0]["value"] == "answer 2"
    assert "building" in caplog.text
    (store,) = cache.glob("qa-*.db")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(str(data)) as engine:
        assert len(engine) == 6
    assert caplog.text == ""
    time.sleep(0.01)
    write_jsonl(data, messages_rows(8))
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(data) as engine:
        assert len(engine) == 8
    assert "rebuilding" in caplog.text and list(cache.glob("qa-*.db")) == [store]


def test_a_local_folder_of_json_files_is_one_dataset(tmp_path: Path, cache: Path) -> None:
    folder = tmp_path / "chats"
    for part in ("a", "b"):
        write_yaml(folder / f"{part}.json", json.dumps(messages_rows(3)))
    with DataEngine(folder) as engine:
        assert len(engine) == 6 and {item["_dataset_name"] for item in engine[0:6]} == {"default"}
    assert len(list(cache.glob("chats-*.db"))) == 1


def test_a_hub_dataset_id_comes_from_the_local_hub_cache(hub: Path, cache: Path, caplog) -> None:
    rows = "".join(json.dumps(row) + "\n" for row in messages_rows(4))
    cached_repo(hub, "someorg/chats", {"data/train.jsonl": rows})
    with DataEngine("someorg/chats") as engine:
        assert len(engine) == 4 and engine[3]["messages"][0]["content"][0]["value"] == "question 3"
    assert len(list(cache.glob("chats-*.db"))) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine("someorg/chats") as engine:
        assert len(engine) == 4
    assert caplog.text == ""  # opened, not built again


def test_a_yaml_in_a_hub_repo_comes_from_the_local_hub_cache(tmp_path: Path, hub: Path, cache: Path) -> None:
    data = write_jsonl(tmp_path / "qa.jsonl", messages_rows(5))
    cached_repo(hub, "someorg/configs", {"sft.yaml": f"qa:\n  path: {data}\n  source: local\n  size: 3\n"})
    with DataEngine("someorg/configs/sft.yaml") as engine:
        assert len(engine) == 3 and engine[0]["_dataset_name"] == "qa"
    assert len(list(cache.glob("sft-*.db"))) == 1


@pytest.mark.parametrize("name", ["someorg/absent", "someorg/absent/sft.yaml"])
def test_offline_a_hub_name_not_cached_is_one_line_at_once(hub: Path, cache: Path, name: str) -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        DataEngine(name)
    message = str(caught.value)
    assert time.monotonic() - started < 5  # not datasets' 25 s of retries
    assert "\n" not in message and name in message
    assert "not in the local Hugging Face cache" in message and "offline" in message


def test_a_hub_yaml_missing_from_a_cached_repo_is_one_line(hub: Path, cache: Path) -> None:
    cached_repo(hub, "someorg/configs", {"sft.yaml": "qa:\n  path: x.jsonl\n"})
    with pytest.raises(StoreError, match="no file dpo.yaml in hub dataset repo someorg/configs") as caught:
        DataEngine("someorg/configs/dpo.yaml")
    assert "\n" not in str(caught.value)


def test_a_path_that_is_nothing_dataengine_takes_says_what_it_takes(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(StoreError) as caught:
        DataEngine(tmp_path / "absent.db")
    message = str(caught.value)
    assert "\n" not in message and "absent.db" in message
    assert all(word in message for word in ("store", "YAML", "org/repo/file.yaml", ".jsonl", "hub dataset id"))

"""Shared fixtures: HF caches in a temporary folder, offline mode, real files and stores."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

# Set before anything imports `datasets`, which reads these once at import time.
_CACHE = tempfile.mkdtemp(prefix="dataidx-hf-cache-")
os.environ["HF_HOME"] = _CACHE
os.environ["HF_DATASETS_CACHE"] = os.path.join(_CACHE, "datasets")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
GOLDEN = SHARED_DATA / "golden"

requires_shared = pytest.mark.skipif(not GOLDEN.is_dir(), reason="../shared/data/golden is not beside the repo")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., Path]:
    """Build a store from YAML text (or a path) into tmp_path; returns the store path."""
    from dataidx.build import build

    counter = iter(range(1000))

    def _make(config: str | Path, **kwargs) -> Path:
        number = next(counter)
        if isinstance(config, str) and "\n" in config:
            config = write_yaml(tmp_path / f"config{number}.yaml", config)
        store = tmp_path / f"store{number}.db"
        build(config, store, **kwargs)
        return store

    return _make


def alpaca_rows(n: int) -> list[dict]:
    return [{"instruction": f"question {i}", "input": "", "output": f"answer {i}"} for i in range(n)]


def chat_rows(turns: list[int]) -> list[dict]:
    """ShareGPT rows with the given number of human/gpt exchanges each."""
    rows = []
    for r, count in enumerate(turns):
        conversation = []
        for t in range(count):
            conversation += [{"from": "human", "value": f"q{r}.{t}"}, {"from": "gpt", "value": f"a{r}.{t}"}]
        rows.append({"conversations": conversation})
    return rows

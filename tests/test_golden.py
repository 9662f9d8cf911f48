"""Conformance with LLaMA-Factory v1: converted samples and index expansion of its demo data."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataidx import DataEngine
from dataidx.index import build
from dataidx.store import run_query

from .helpers import GOLDEN, GOLDEN_SOURCES, SHARED, golden_config, read_jsonl, requires_shared

pytestmark = requires_shared

def test_every_golden_file_is_covered() -> None:
    names = {p.name.split(".")[0] for p in GOLDEN.glob("*.index.jsonl")}
    assert names == set(GOLDEN_SOURCES)


@pytest.mark.parametrize("name", sorted(GOLDEN_SOURCES))
def test_index_and_samples_match_llamafactory(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SHARED)  # v1's media paths (data/mllm_demo_data/1.jpg) start from LLaMA-Factory's root
    config = tmp_path / "config.yaml"
    config.write_text(golden_config([name]))
    store = tmp_path / "store.db"
    build(config, store)

    golden_index = [tuple(pair) for pair in read_jsonl(GOLDEN / f"{name}.index.jsonl")]
    _, rows = run_query(store, "SELECT row, cut FROM entries WHERE mixture = 'default' ORDER BY position")
    assert [tuple(r) for r in rows] == golden_index

    samples = read_jsonl(GOLDEN / f"{name}.samples.jsonl")
    with DataEngine(store) as engine:
        assert len(engine) == len(golden_index)
        for position, (row, cut) in enumerate(golden_index):
            expected = dict(samples[row])
            if cut is not None:
                expected["messages"] = expected["messages"][:cut]
            assert engine[position] == {"_dataset_name": name, **expected}, (name, position)


def test_llamafactory_v1_sft_demo_yaml_builds_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SHARED)
    store = tmp_path / "v1.db"
    build("data/v1_sft_demo.yaml", store)
    with DataEngine(store) as engine:
        assert len(engine) == 91 + 500
        _, rows = run_query(store, "SELECT dataset, entries, distinct_rows FROM composition ORDER BY dataset")
        assert rows == [("alpaca_en_demo", 500, 500, ), ("identity", 91, 91)]
        _, paths = run_query(store, "SELECT path FROM datasets ORDER BY position")
        data = SHARED.resolve() / "data"
        assert paths == [(str(data / "identity.json"),), (str(data / "alpaca_en_demo.json"),)]

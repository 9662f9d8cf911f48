"""Export: a mixture's samples in mixture order to JSON lines and Parquet, and as a datasets view."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import DataidxError
from dataidx.read import export_mixture

from .helpers import write_jsonl


def test_jsonl_and_parquet_hold_the_mixture_in_order(tmp_path: Path, demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        expected = engine[0:len(engine)]
        result = CliRunner().invoke(cli, ["export", str(demo_store), "-o", str(tmp_path / "out.jsonl")])
        assert result.exit_code == 0, result.output
        assert f"wrote {len(engine)} samples" in result.stderr
        lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert lines == expected
        assert export_mixture(demo_store, tmp_path / "out.parquet") == len(engine)
        rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
        for row, sample in zip(rows, expected, strict=True):
            assert {k: v for k, v in row.items() if v is not None} == sample
        assert not list(tmp_path.glob(".*.tmp"))


def test_to_hf_is_a_datasets_view_of_the_mixture(demo_store: Path) -> None:
    with DataEngine(demo_store) as engine:
        hf = engine.to_hf()
        assert len(hf) == len(engine)
        assert hf[3]["messages"] == engine[3]["messages"] and hf[3]["_dataset_name"] == engine[3]["_dataset_name"]


def test_export_errors(tmp_path: Path, demo_store: Path, make_store) -> None:
    with pytest.raises(DataidxError, match="unknown export format"):
        export_mixture(demo_store, tmp_path / "out.csv")
    # Rows of the `none` converter may carry keys the standard sample lacks: JSON lines keep them.
    write_jsonl(tmp_path / "std.jsonl", [{"messages": [{"role": "user", "content": [{"type": "text", "value": "q"}]},
                                                       {"role": "assistant",
                                                        "content": [{"type": "text", "value": "a"}]}],
                                          "source_url": "http://x"}])
    store = make_store(f"std:\n  path: {tmp_path / 'std.jsonl'}\n  source: local\n")
    with pytest.raises(DataidxError, match="position 0: has keys source_url .* export to .jsonl"):
        export_mixture(store, tmp_path / "std.parquet")
    assert not (tmp_path / "std.parquet").exists() and not list(tmp_path.glob(".*.tmp"))
    assert export_mixture(store, tmp_path / "std-out.jsonl") == 1
    result = CliRunner().invoke(cli, ["export", str(demo_store), "-o", str(tmp_path / "nowhere" / "x.jsonl")])
    assert result.exit_code == 1 and "does not exist" in result.output


def test_parquet_refuses_nested_keys_it_would_drop(tmp_path: Path, make_store) -> None:
    write_jsonl(tmp_path / "named.jsonl", [{"messages": [
        {"role": "user", "name": "bob", "content": [{"type": "text", "value": "q"}]},
        {"role": "assistant", "name": "eve", "content": [{"type": "text", "value": "a"}]}]}])
    store = make_store(f"named:\n  path: {tmp_path / 'named.jsonl'}\n  source: local\n")
    with pytest.raises(DataidxError, match="position 0: messages\\[0\\] has keys name"):
        export_mixture(store, tmp_path / "named.parquet")

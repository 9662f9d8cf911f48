"""What keeps memory flat at any size: no Dataset opened to build, source pages let go of."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dataidx.sources import ArrowRows, arrow_files_at, load
from dataidx.spec import DatasetSpec

from .helpers import alpaca_rows, write_jsonl


def _resident_file_pages_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile line")


def test_a_local_split_is_found_without_opening_its_dataset(tmp_path: Path) -> None:
    """Opening a Dataset maps its cache and touches most of its pages; the build reads the
    files that hold the split itself, so the loader hands them over unopened."""
    spec = DatasetSpec(name="a", path=str(write_jsonl(tmp_path / "a.jsonl", alpaca_rows(500))), source="local")
    loaded = load(spec)
    assert loaded.arrow_paths and all(Path(path).is_file() for path in loaded.arrow_paths)
    assert loaded._dataset is None
    rows = ArrowRows(arrow_files_at(loaded.arrow_paths))
    assert len(rows) == 500 == len(loaded.dataset)  # opened on demand, the same rows
    assert rows.row(499) == loaded.dataset[499]
    chunks = list(rows.chunks(128, 1 << 30))
    assert [(chunk.first, chunk.length) for chunk in chunks] == [(0, 128), (128, 128), (256, 128), (384, 116)]
    assert [row for chunk in chunks for row in chunk.rows()] == [rows.row(i) for i in range(500)]
    assert [len(chunk.table) for chunk in rows.chunks(100, 1)] == [100] * 5  # past the byte bound: a piece each


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_releasing_rows_lets_go_of_the_pages_a_pass_read(tmp_path: Path) -> None:
    path = tmp_path / "big.arrow"
    text = pa.array(["x" * 2000] * 20_000)  # 40 MB of text
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("output", pa.string())])) as writer:
        for start in range(0, len(text), 1000):
            writer.write_batch(pa.record_batch([text[start : start + 1000]], names=["output"]))
    rows = ArrowRows(arrow_files_at([str(path)]))
    before = _resident_file_pages_mib()
    assert all(rows.row(i)["output"] == "x" * 2000 for i in range(0, len(rows), 7))
    read = _resident_file_pages_mib() - before
    rows.release()
    assert read > 30 and _resident_file_pages_mib() - before < 5
    assert rows.row(19_999)["output"] == "x" * 2000  # read again after the release

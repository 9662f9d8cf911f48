"""What keeps memory flat at any size: no Dataset opened to build, source pages let go of."""

from __future__ import annotations

import os
import sys
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


def test_a_reader_keeps_no_python_objects_for_the_batches_it_has_read(tmp_path: Path) -> None:
    """A DataLoader worker in random order soon reads every batch of its datasets, and what it
    keeps per batch is its private memory's growth: views and a reader per column were 4 KB a
    batch, 7.6 MiB of growth per worker over 1.86M entries (issue 50, item 24). Flat columns now
    keep a few integers in an array made once per file, so reading a row of each of 300 batches
    allocates nothing that lasts."""
    import tracemalloc

    path = tmp_path / "flat.arrow"
    schema = pa.schema([("instruction", pa.string()), ("input", pa.string()), ("output", pa.string())])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for batch in range(300):
            text = pa.array([f"{batch}-{row}" if row % 5 else None for row in range(20)])  # nulls too
            writer.write_batch(pa.record_batch([text, text, text], schema=schema))
    rows = ArrowRows(arrow_files_at([str(path)]))
    assert rows.row(11) == {"instruction": "0-11", "input": "0-11", "output": "0-11"}  # the file's views, made once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        found = [rows.row(batch * 20 + 11)["output"] for batch in range(1, 300)]
        kept = tracemalloc.get_traced_memory()[0] - before - sum(map(sys.getsizeof, found)) - sys.getsizeof(found)
    finally:
        tracemalloc.stop()
    assert found == [f"{batch}-11" for batch in range(1, 300)]
    assert kept < 1024, f"{kept} bytes kept for 299 batches read"
    assert rows.row(20 * 7 + 5) == {"instruction": None, "input": None, "output": None}

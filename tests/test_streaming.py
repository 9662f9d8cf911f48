"""streaming: true sources are consumed once at build time and indexed like files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dataidx.index import build

from .helpers import alpaca_rows, chat_rows, engine_length, engine_samples, write_jsonl, write_yaml


def config(tmp_path: Path, streaming: bool) -> Path:
    if not (tmp_path / "qa.jsonl").exists():
        write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(50))
        write_jsonl(tmp_path / "chat.jsonl", chat_rows([1, 3, 2] * 10))
    flag = "true" if streaming else "false"
    return write_yaml(tmp_path / f"s-{flag}.yaml",
                      f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n"
                      f"  streaming: {flag}\n"
                      f"chat:\n  path: {tmp_path / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n"
                      "  size: 40\n")


def test_a_streaming_source_is_materialised_beside_the_store_and_indexed(tmp_path: Path) -> None:
    streamed = build(config(tmp_path, True), tmp_path / "streamed.db")
    loaded = build(config(tmp_path, False), tmp_path / "loaded.db")
    assert [d.entries for d in streamed.datasets] == [d.entries for d in loaded.datasets] == [50, 60]
    a, b = engine_samples(tmp_path / "streamed.db"), engine_samples(tmp_path / "loaded.db")
    assert a == b  # streaming and non-streaming datasets mixed in one YAML
    materialised = list((tmp_path / "streamed.db.streams").rglob("*.arrow"))
    assert materialised, "the stream's rows live next to the store"
    # Readers map the materialised rows; the datasets cache is not needed for them. A process with
    # an empty cache of its own shows it (wiping the session's cache made other tests' stores stale).
    code = "import json, sys; from dataidx import DataEngine; print(json.dumps(DataEngine(sys.argv[1])[3]))"
    empty = {"HF_DATASETS_CACHE": str(tmp_path / "empty" / "datasets"), "HF_HOME": str(tmp_path / "empty")}
    shown = subprocess.run([sys.executable, "-c", code, str(tmp_path / "streamed.db")], env={**os.environ, **empty},
                           capture_output=True, text=True, check=True).stdout
    assert json.loads(shown) == b[3]


def test_a_changed_streaming_source_is_streamed_again(tmp_path: Path) -> None:
    yaml = config(tmp_path, True)
    build(yaml, tmp_path / "s.db")
    write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(70))
    summary = build(yaml, tmp_path / "s.db")
    assert summary.datasets[0].entries == 70
    assert len(list((tmp_path / "s.db.streams").rglob("*.arrow"))) == 1  # the old stream's rows are gone
    assert engine_length(tmp_path / "s.db") == 70 + 40


def test_a_relative_output_path_keeps_its_materialised_stream(tmp_path: Path, monkeypatch) -> None:
    from dataidx.read import StoreReader
    from dataidx.sources import arrow_files_state

    yaml = config(tmp_path, True)
    monkeypatch.chdir(tmp_path)
    build(yaml, "relative.db")
    with StoreReader("relative.db") as reader:
        assert arrow_files_state(reader.datasets[1].arrow_files) == "intact"


@pytest.mark.slow
def test_a_rebuild_keeps_other_stores_streams_in_a_linked_streams_folder(tmp_path: Path) -> None:
    """Users link ``<store>.streams`` to a bigger disk, and two stores may share it: a rebuild whose
    source changed removes no stream there, another store's included; in a folder of its own it
    removes only the stream its old store recorded."""
    from .helpers import engine_samples

    shared, other_data = tmp_path / "big-disk", tmp_path / "other"
    shared.mkdir()
    other_data.mkdir()
    yaml, other = config(tmp_path, True), config(other_data, True)
    os.symlink(shared, tmp_path / "a.db.streams")
    os.symlink(shared, tmp_path / "b.db.streams")
    build(other, tmp_path / "b.db")
    kept = engine_samples(tmp_path / "b.db")
    build(yaml, tmp_path / "a.db")
    write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(70))
    build(yaml, tmp_path / "a.db")
    assert len(list(shared.rglob("*.arrow"))) == 3  # b's, a's old one and a's new one
    assert engine_samples(tmp_path / "b.db") == kept
    # A folder of its own: b's stream put there by hand (a copy) stays, a's old stream goes.
    own = tmp_path / "c.db.streams"
    build(config(other_data, True), tmp_path / "c.db")
    write_jsonl(other_data / "qa.jsonl", alpaca_rows(30))
    foreign = own / "json" / "not-this-stores"
    shutil.copytree(next(shared.glob("*/*")), foreign)
    build(config(other_data, True), tmp_path / "c.db")
    assert foreign.is_dir() and len([p for p in own.glob("*/*") if p != foreign]) == 1

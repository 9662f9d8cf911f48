"""DataEngine on a YAML path: built once into the cache, opened after, rebuilt when a source
changes, and built once when processes start together."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from dataidx import DataEngine
from dataidx.cache import cached_store

from .helpers import alpaca_rows, engine_length, write_jsonl, write_yaml


def config(tmp_path: Path, rows: int = 20) -> Path:
    write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(rows))
    return write_yaml(tmp_path / "sft.yaml",
                      f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n")


def test_a_yaml_path_builds_once_then_opens(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("DATAIDX_CACHE", str(tmp_path / "cache"))
    yaml = config(tmp_path)
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(yaml) as engine:
        first = engine[0]
    assert len(engine) == 20 and "building" in caplog.text
    (store,) = (tmp_path / "cache").glob("sft-*.db")
    built_at = store.stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(yaml) as engine:
        assert engine[0] == first
    assert caplog.text == "" and store.stat().st_mtime_ns == built_at
    # Another seed is another store; the same YAML text in another place is another store too.
    assert cached_store(yaml, seed=7)[0] != store


@pytest.mark.slow
def test_a_changed_source_rebuilds_saying_so(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("DATAIDX_CACHE", str(tmp_path / "cache"))
    yaml = config(tmp_path)
    with DataEngine(yaml) as engine:
        assert len(engine) == 20
    time.sleep(0.01)
    write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(25))
    with caplog.at_level(logging.WARNING, logger="dataidx"), DataEngine(yaml) as engine:
        assert len(engine) == 25
    assert "rebuilding" in caplog.text and "changed" in caplog.text


def _open(yaml: str, folder: str, queue) -> None:
    queue.put(cached_store(yaml, folder=folder)[1])


@pytest.mark.slow
def test_processes_starting_together_build_once(tmp_path: Path) -> None:
    yaml = config(tmp_path, rows=2000)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_open, args=(str(yaml), str(tmp_path / "cache"), queue)) for _ in range(3)]
    for worker in workers:
        worker.start()
    built = sorted(queue.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    assert built == [False, False, True]
    assert len(list((tmp_path / "cache").glob("*.db"))) == 1
    assert not [p for p in os.listdir(tmp_path / "cache") if p.endswith(".tmp")]


def test_cache_lists_and_cleans(tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    from dataidx.cli import cli

    monkeypatch.setenv("DATAIDX_CACHE", str(tmp_path / "cache"))
    yaml = config(tmp_path)
    DataEngine(yaml).close()  # builds it into the cache
    DataEngine(yaml, seed=3).close()
    runner = CliRunner()
    result = runner.invoke(cli, ["cache", "--json"])
    assert result.exit_code == 0 and len(__import__("json").loads(result.stdout)) == 2
    old = sorted((tmp_path / "cache").glob("*.db"))[0]
    os.utime(old, (time.time() - 40 * 86400, time.time() - 40 * 86400))
    result = runner.invoke(cli, ["cache", "--clean", "30"])
    assert result.exit_code == 0 and "removed 1 cached stores" in result.stderr
    assert sorted((tmp_path / "cache").glob("*.db")) != [] and not old.exists()
    assert engine_length(yaml) == 20  # whichever was removed is built again on use

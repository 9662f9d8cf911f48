"""Issue 50, item 5: a store moves with its data. A project folder moved whole (store, token
files, sources) opens where it lands; a source changed after the move is still refused; and when
the sources did not move with the store, one line says where they were looked for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dataidx import DataEngine
from dataidx.errors import StaleStoreError
from dataidx.index import build
from dataidx.read import StoreReader, export_mixture, verify_store
from dataidx.store import store_info

from .helpers import alpaca_rows, write_jsonl, write_yaml


def project(folder: Path) -> Path:
    """A project as users lay one out: the config, a data file and a data folder, the store beside
    them in ``out/`` (so the sources are reached with ``..``). Returns the store."""
    write_jsonl(folder / "data" / "one.jsonl", alpaca_rows(6))
    write_jsonl(folder / "data" / "parts" / "a.jsonl", alpaca_rows(3))
    write_jsonl(folder / "data" / "parts" / "b.jsonl", alpaca_rows(4))
    config = write_yaml(folder / "config.yaml", f"""
one:
  path: {folder / 'data' / 'one.jsonl'}
  source: local
  converter: alpaca
parts:
  path: {folder / 'data' / 'parts'}
  source: local
  converter: alpaca
""")
    (folder / "out").mkdir()
    build(config, folder / "out" / "s.db")
    return folder / "out" / "s.db"


def samples(store: Path, **keywords) -> list[dict]:
    with StoreReader(store, **keywords) as reader:
        return reader.get_many(list(range(len(reader))))


def test_a_project_folder_moved_whole_opens_reads_exports_and_verifies_where_it_lands(tmp_path: Path) -> None:
    store = project(tmp_path / "before")
    expected = samples(store)
    arrow = [path for dataset in store_info(store)["datasets"] for path in dataset["arrow_files"]]
    shutil.move(tmp_path / "before", tmp_path / "after")
    moved = tmp_path / "after" / "out" / "s.db"
    assert samples(moved) == expected  # refused before: "/.../before/data/one.jsonl is missing"
    assert export_mixture(moved, tmp_path / "x.jsonl") == len(expected)
    assert verify_store(moved)["ok"] is True
    for path in arrow:  # the datasets cache cleaned (or another machine): the sources are loaded again, moved
        Path(path).unlink()
    assert samples(moved) == expected


@pytest.mark.slow
def test_a_moved_project_serves_its_stored_tokens_and_says_how_to_find_its_moved_tokenizer(
        tmp_path: Path, tiny_tokenizer: Path) -> None:
    from click.testing import CliRunner

    from dataidx.cli import cli
    from dataidx.render import RenderRequest, render_store

    store = project(tmp_path / "before")
    shutil.copytree(tiny_tokenizer, tmp_path / "before" / "tokenizer")
    render_store(RenderRequest(store, tmp_path / "before" / "tokenizer", cutoff=256, store_tokens=True, jobs=1))
    with DataEngine(store, render="default") as engine:
        expected = [engine[i] for i in range(len(engine))]
    shutil.move(tmp_path / "before", tmp_path / "after")
    moved = tmp_path / "after" / "out" / "s.db"
    with DataEngine(moved, render="default") as engine:  # stored tokens: no tokenizer needed
        assert [engine[i] for i in range(len(engine))] == expected
    shown = CliRunner().invoke(cli, ["show", str(moved), "0"])
    assert shown.exit_code == 0 and json.loads(shown.stdout) == samples(moved)[0], shown.output
    rendered = CliRunner().invoke(cli, ["show", str(moved), "0", "--render", "default"])  # renders: needs it
    assert rendered.exit_code == 1 and rendered.stderr == (
        f"Error: render spec 'default': its tokenizer is not at {tmp_path / 'before' / 'tokenizer'} any more; if it "
        "moved, dataidx render STORE --tokenizer NEW_PATH --cutoff 256 --truncation drop --name default (and the "
        "--template it was rendered with) records where it is, rendering nothing again\n")
    assert render_store(RenderRequest(moved, tmp_path / "after" / "tokenizer", cutoff=256)).reused
    rendered = CliRunner().invoke(cli, ["show", str(moved), "0", "--render", "default"])
    assert rendered.exit_code == 0 and json.loads(rendered.stdout)["input_ids"] == expected[0]["input_ids"]


def test_a_source_changed_after_the_move_is_still_refused_at_its_new_place(tmp_path: Path) -> None:
    project(tmp_path / "before")
    shutil.move(tmp_path / "before", tmp_path / "after")
    with open(tmp_path / "after" / "data" / "one.jsonl", "a") as handle:
        handle.write(json.dumps(alpaca_rows(1)[0]) + "\n")
    write_jsonl(tmp_path / "after" / "data" / "parts" / "c.jsonl", alpaca_rows(1))
    with pytest.raises(StaleStoreError) as refused:
        StoreReader(tmp_path / "after" / "out" / "s.db")
    assert f"dataset 'one' changed since the build: {tmp_path / 'after' / 'data' / 'one.jsonl'} changed size" in str(
        refused.value)
    report = verify_store(tmp_path / "after" / "out" / "s.db")
    assert report["datasets"]["parts"] == [f"{tmp_path / 'after' / 'data' / 'parts' / 'c.jsonl'} was added"]


def test_a_copied_project_checks_its_own_sources_not_those_it_was_copied_from(tmp_path: Path) -> None:
    store = project(tmp_path / "original")
    expected = samples(store)
    shutil.copytree(tmp_path / "original", tmp_path / "copy")  # cp -a: the times kept
    copy = tmp_path / "copy" / "out" / "s.db"
    assert samples(copy) == expected
    write_jsonl(tmp_path / "copy" / "data" / "one.jsonl", alpaca_rows(7))
    with pytest.raises(StaleStoreError, match=f"{tmp_path / 'copy' / 'data' / 'one.jsonl'} changed size"):
        StoreReader(copy)  # it read the original's sources before, and served rows its own no longer hold
    assert samples(store) == expected


def test_sources_that_did_not_move_with_the_store_are_named_where_they_were_looked_for(tmp_path: Path) -> None:
    store = project(tmp_path / "project")
    shutil.move(tmp_path / "project" / "data", tmp_path / "elsewhere")
    with pytest.raises(StaleStoreError) as refused:
        StoreReader(store)
    message = str(refused.value)  # its place relative to the store is where it was: one place, said once
    assert "\n" not in message and f"{tmp_path / 'project' / 'data' / 'one.jsonl'} is missing; " in message
    shutil.move(tmp_path / "project" / "out", tmp_path / "out")  # now the store moved, and its sources did not
    with pytest.raises(StaleStoreError) as refused:
        StoreReader(tmp_path / "out" / "s.db")
    assert (f"{tmp_path / 'project' / 'data' / 'one.jsonl'} is missing (and so is {tmp_path / 'data' / 'one.jsonl'}, "
            "its place relative to the store)") in str(refused.value)
    report = verify_store(tmp_path / "out" / "s.db")["datasets"]["parts"]
    assert report == [f"{tmp_path / 'project' / 'data' / 'parts' / 'a.jsonl'} is missing (and so is "
                      f"{tmp_path / 'data' / 'parts' / 'a.jsonl'}, its place relative to the store)",
                      "1 more of its files is missing"]

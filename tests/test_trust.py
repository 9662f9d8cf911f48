"""A store you can trust: stale sources refused, bad rows named or recorded, bad stores explained."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.convert import convert_row, converters, register_converter
from dataidx.errors import ConversionError, SourceError, StaleStoreError
from dataidx.index import build
from dataidx.read import verify_store
from dataidx.store import run_query, store_info

from .helpers import alpaca_rows, engine_length, engine_samples, examples, row_cuts, write_jsonl, write_yaml


def alpaca_store(tmp_path: Path, make_store, rows: int = 5, extra: str = "") -> tuple[Path, Path]:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(rows))
    return make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n{extra}"), data


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


# --- staleness -----------------------------------------------------------------------------

def test_a_byte_changed_in_place_is_found_by_verify(tmp_path: Path, make_store) -> None:
    store, data = alpaca_store(tmp_path, make_store)
    stat = data.stat()
    content = data.read_bytes()
    data.write_bytes(content.replace(b"answer 3", b"answer 7"))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert engine_length(store) == 5  # the cheap check on open cannot see it
    report = verify_store(store)
    assert report["ok"] is False
    assert report["datasets"]["alp"] == [f"{data} has different content (same size and mtime)"]
    result = run("verify", str(store))
    assert result.exit_code == 1 and "has different content" in result.output
    data.write_bytes(content)
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert run("verify", str(store), "--json").exit_code == 0
    assert json.loads(run("verify", str(store), "--json").output)["ok"] is True


@pytest.mark.parametrize(("change", "expected"), [("grow", "a.jsonl changed size"), ("shrink", "a.jsonl changed size"),
                                                ("touch", "a.jsonl was modified after the build"),
                                                ("remove", "a.jsonl is missing")])
def test_grown_shrunk_touched_or_missing_sources_are_refused_on_open(tmp_path: Path, make_store, change: str,
                                                                     expected: str) -> None:
    store, data = alpaca_store(tmp_path, make_store)
    if change == "grow":
        write_jsonl(data, alpaca_rows(6))
    elif change == "shrink":
        write_jsonl(data, alpaca_rows(4))
    elif change == "touch":
        later = time.time() + 10
        os.utime(data, (later, later))
    else:
        data.unlink()
    with pytest.raises(StaleStoreError, match=f"dataset 'alp' changed since the build: .*{expected}"):
        DataEngine(store)
    result = run("show", str(store), "0")
    assert result.exit_code == 1 and expected in result.stderr and result.stderr.count("\n") == 1
    assert run("verify", str(store)).exit_code == 1
    if change == "grow":
        assert engine_length(store, verify=False) == 5  # the rows the build indexed


def test_a_file_added_to_a_dataset_folder_is_refused(tmp_path: Path, make_store) -> None:
    folder = tmp_path / "parts"
    write_jsonl(folder / "p0.jsonl", alpaca_rows(3))
    store = make_store(f"f:\n  path: {folder}\n  source: local\n  converter: alpaca\n")
    write_jsonl(folder / "p1.jsonl", alpaca_rows(2))
    with pytest.raises(StaleStoreError, match="p1.jsonl was added"):
        DataEngine(store)


def test_no_verify_reads_a_changed_store_anyway(tmp_path: Path, make_store) -> None:
    store, data = alpaca_store(tmp_path, make_store)
    expected = engine_samples(store)[2]
    os.utime(data, (1, 1))
    assert engine_samples(store, verify=False)[2] == expected
    result = run("show", str(store), "2", "--no-verify")
    assert result.exit_code == 0 and json.loads(result.output) == expected


def test_a_changed_converter_version_is_refused_on_open_and_by_verify(tmp_path: Path, make_store) -> None:
    @register_converter("trust_versioned", version="1")
    def first(row: dict) -> dict:
        return {"messages": [{"role": "assistant", "content": [{"type": "text", "value": row["output"]}]}]}

    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(2))
    store = make_store(f"v:\n  path: {data}\n  source: local\n  converter: trust_versioned\n")
    try:
        assert engine_samples(store)[1]["messages"][0]["content"][0]["value"] == "answer 1"
        with pytest.warns(UserWarning):
            register_converter("trust_versioned", version="2")(first)
        with pytest.raises(StaleStoreError,
                           match="converter 'trust_versioned' is version 2, the store was built with version 1"):
            DataEngine(store)
        assert verify_store(store)["datasets"]["v"] == [
            "converter 'trust_versioned' is version 2, the store was built with version 1"
        ]
        converters._plugins.pop("trust_versioned")
        with pytest.raises(StaleStoreError, match="converter 'trust_versioned' is not registered in this process"):
            DataEngine(store)
    finally:
        converters._plugins.pop("trust_versioned", None)


# --- bad rows --------------------------------------------------------------------------------

def test_skip_records_rejected_rows_with_reasons(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "chat.jsonl", [
        {"conversations": [{"from": "human", "value": "q0"}, {"from": "gpt", "value": "a0"}]},
        {"conversations": [{"from": "human", "value": "<image> q1"}, {"from": "gpt", "value": "a1"}]},
        {"conversations": [{"from": "human", "value": "q2"}, {"from": "gpt", "value": "a2"}]},
    ])
    config = write_yaml(tmp_path / "c.yaml", f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n"
                                             "  on_error: skip\n")
    summary = build(config, tmp_path / "s.db")
    assert [(d.rows, d.entries, d.rejected) for d in summary.datasets] == [(3, 2, 1)]
    _, rejects = run_query(tmp_path / "s.db", "SELECT * FROM rejects")
    assert rejects == [("chat", 1, "MediaMismatch: more <image> placeholders than files in column 'images' (0)")]
    with DataEngine(tmp_path / "s.db") as engine:
        assert [s["messages"][1]["content"][0]["value"] for s in engine[:]] == ["a0", "a2"]
        assert store_info(tmp_path / "s.db")["datasets"][0]["rejected"] == 1
        result = run("build", str(config), "-o", str(tmp_path / "t.db"))
        assert result.exit_code == 0 and "chat     3     2        2           0             1" in result.stderr


def test_raise_names_dataset_row_converter_and_cause(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", [{"instruction": 4, "output": "a"}, {"instruction": 5, "output": "b"}])
    config = write_yaml(tmp_path / "c.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    with pytest.raises(ConversionError) as caught:
        build(config, tmp_path / "s.db")
    assert str(caught.value) == (
        "dataset 'alp', row 0, converter 'alpaca': TypeError: unsupported operand type(s) for +: 'int' and 'str'"
    )


def test_invalid_utf8_is_found_at_build_time(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_bytes(b'{"instruction": "ok", "output": "fine"}\n{"instruction": "bad \xff\xfe here", "output": "x"}\n')
    config = write_yaml(tmp_path / "c.yaml", f"u:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    with pytest.raises(SourceError, match=rf"dataset 'u': {data}: row 1: column 'instruction' is not valid UTF-8"):
        build(config, tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()
    skip = write_yaml(tmp_path / "skip.yaml", f"u:\n  path: {data}\n  source: local\n  converter: alpaca\n"
                                              "  on_error: skip\n")
    build(skip, tmp_path / "s.db")
    _, rejects = run_query(tmp_path / "s.db", "SELECT row, reason FROM rejects")
    assert rejects[0][0] == 1 and "not valid UTF-8" in rejects[0][1]
    assert engine_length(tmp_path / "s.db") == 1


def test_a_null_turn_is_never_indexed_quietly(tmp_path: Path) -> None:
    """A null turn fails the converter at fetch time, so the build must refuse or reject the row."""
    data = write_jsonl(tmp_path / "chat.jsonl", [
        {"conversations": [{"from": "human", "value": "q0"}, {"from": "gpt", "value": "a0"}]},
        {"conversations": [None, {"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}]},
    ])
    text = f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n"
    with pytest.raises((SourceError, ConversionError), match="row 1"):
        build(write_yaml(tmp_path / "c.yaml", text), tmp_path / "s.db")
    build(write_yaml(tmp_path / "skip.yaml", text + "  on_error: skip\n"), tmp_path / "s.db")
    _, rejects = run_query(tmp_path / "s.db", "SELECT row FROM rejects")
    assert rejects == [(1,)]
    assert [s["messages"][-1]["content"][0]["value"] for s in engine_samples(tmp_path / "s.db")] == ["a0"]


def test_a_broken_json_line_names_the_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "broken.jsonl"
    data.write_text('{"instruction": "a", "output": "b"}\n{"instruction": "c", "output": }\n')
    config = write_yaml(tmp_path / "c.yaml", f"b:\n  path: {data}\n  source: local\n")
    result = run("build", str(config), "-o", str(tmp_path / "s.db"))
    assert result.exit_code == 1
    assert f"dataset 'b': {data}: line 2, column 32: not valid JSON (Expecting value)" in result.stderr


def test_wrong_on_error_value_is_a_config_error(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "c.yaml", "a:\n  path: x.json\n  source: local\n  on_error: ignore\n")
    result = run("build", str(config), "-o", str(tmp_path / "s.db"))
    assert result.exit_code == 1 and "key 'on_error' must be one of raise, skip, got 'ignore'" in result.stderr


# --- bad stores -----------------------------------------------------------------------------

def bad_stores(tmp_path: Path, make_store) -> dict[str, tuple[Path, str]]:
    good, _ = alpaca_store(tmp_path, make_store)
    plain = tmp_path / "plain.bin"  # not .txt: DataEngine builds a .txt file as v1 does, as text data
    plain.write_text("not a database")
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:1500])
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    newer = tmp_path / "newer.db"
    shutil.copyfile(good, newer)
    import sqlite3

    connection = sqlite3.connect(newer)
    connection.execute("UPDATE alembic_version SET version_num = '9999'")
    connection.commit()
    connection.close()
    return {
        "missing": (tmp_path / "absent.db", "store not found"),
        "not a store": (plain, "not a dataidx store (not a SQLite file)"),
        "truncated": (truncated, "cannot read store"),
        "garbage": (garbage, "cannot read store"),
        "newer": (newer, "made by a newer dataidx"),
    }


def test_every_command_explains_a_bad_store_in_one_line(tmp_path: Path, make_store) -> None:
    config = write_yaml(tmp_path / "m.yaml", "alp:\n  path: x\n  source: local\n  converter: alpaca\n")
    for name, (store, message) in bad_stores(tmp_path, make_store).items():
        for args in (["info"], ["show", "0"], ["query", "SELECT 1"], ["compose"], ["verify"],
                     ["mix", str(config), "--name", "m"], ["remove-mixture", "default"]):
            result = run(args[0], str(store), *args[1:])
            assert result.exit_code == 1, (name, args, result.output)
            assert message in result.stderr, (name, args, result.stderr)
            assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        with pytest.raises(Exception, match="store|SQLite") as caught:
            DataEngine(store)
        assert type(caught.value).__name__ == "StoreError"
        if name != "missing":
            migrate = run("migrate", str(store))
            assert migrate.exit_code == 1 and migrate.stderr.count("\n") == 1


# --- fuzz ------------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=6),
              st.sampled_from(["<image>", "human", "gpt", "function_call", "assistant", "tool", "{}", "[1]"])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(["from", "value", "role", "content", "loss_weight",
                                                                "images", "x"]), children, max_size=4)),
    max_leaves=12,
)
rows = st.dictionaries(
    st.sampled_from(["instruction", "input", "output", "system", "conversations", "tools", "chosen", "rejected",
                     "messages", "images", "videos", "audios", "other"]),
    json_values, max_size=6,
)


@settings(max_examples=examples(400))
@given(row=rows, name=st.sampled_from(["alpaca", "sharegpt", "pair", "none"]))
def test_converters_return_a_sample_or_a_clean_error(row: dict, name: str) -> None:
    plugin = converters.get(name)
    try:
        sample = convert_row(plugin.func, row, "fuzz", 0, name)
        assert isinstance(sample, dict)
        cuts = row_cuts(plugin.func, row, "fuzz", 0, name)
        assert cuts and all(c is None or c > 0 for c in cuts)
    except ConversionError as exc:
        assert str(exc).startswith(f"dataset 'fuzz', row 0, converter '{name}': ")


def test_files_in_subfolders_count_as_sources(tmp_path: Path, make_store) -> None:
    folder = tmp_path / "parts"
    write_jsonl(folder / "a" / "p0.jsonl", alpaca_rows(3))
    write_jsonl(folder / "b" / "p1.jsonl", alpaca_rows(2))
    built = make_store(f"f:\n  path: {folder}\n  source: local\n  converter: alpaca\n")
    assert engine_length(built) == 5
    assert len(store_info(built)["datasets"][0]["files"]) == 2
    write_jsonl(folder / "b" / "p1.jsonl", alpaca_rows(4))
    with pytest.raises(StaleStoreError, match="p1.jsonl changed size"):
        DataEngine(built)
    assert json.loads(CliRunner().invoke(cli, ["verify", str(built), "--json"]).output)["ok"] is False


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
    with pytest.raises(StaleStoreError,
                       match="the Arrow data recorded at build time was written anew; rebuild the store"):
        DataEngine(tmp_path / "old.db")
    assert engine_samples(tmp_path / "s.db")[1]["messages"][1]["content"][0]["value"] == "answer 9"
    assert json.loads(CliRunner().invoke(cli, ["verify", str(tmp_path / "s.db"), "--json"]).output)["ok"] is True

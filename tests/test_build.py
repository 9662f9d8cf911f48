"""Building stores from real files: loaders, views, provenance, bad input, atomic replacement."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import ConfigError, ConversionError, DataidxError, SourceError
from dataidx.index import build
from dataidx.store import run_query, store_info

from .helpers import alpaca_rows, chat_rows, engine_length, engine_samples, write_jsonl, write_yaml


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_multi_turn_rows_expand_and_views_answer(tmp_path: Path, make_store) -> None:
    write_jsonl(tmp_path / "chat.jsonl", chat_rows([1, 3, 2]))
    write_jsonl(tmp_path / "alpaca.jsonl", alpaca_rows(4))
    store = make_store(f"""
chat:
  path: {tmp_path / 'chat.jsonl'}
  source: local
  converter: sharegpt
alpaca:
  path: {tmp_path / 'alpaca.jsonl'}
  source: local
  converter: alpaca
  size: 2
""")
    _, rows = run_query(store, "SELECT position, dataset, row, cut FROM entries ORDER BY position")
    assert rows[:6] == [(0, "chat", 0, 2), (1, "chat", 1, 2), (2, "chat", 1, 4), (3, "chat", 1, 6),
                        (4, "chat", 2, 2), (5, "chat", 2, 4)]
    assert len(rows) == 8
    assert all(r[1] == "alpaca" and r[3] == 2 for r in rows[6:])
    _, composition = run_query(store, "SELECT * FROM composition")
    assert composition == [("default", "chat", 6, 3, 0.75), ("default", "alpaca", 2, 2, 0.25)]


def test_info_records_provenance(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(5))
    store = make_store(f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n  weight: 2\n", seed=9)
    info = store_info(store)
    (dataset,) = info["datasets"]
    assert (dataset["name"], dataset["rows"], dataset["entries"], dataset["converter"]) == ("a", 5, 5, "alpaca")
    assert dataset["files"][0]["path"] == str(data) and dataset["files"][0]["size"] == data.stat().st_size
    assert dataset["arrow_files"]
    (mixture,) = info["mixtures"]
    assert (mixture["name"], mixture["seed"], mixture["sampling"], mixture["entries"]) == ("default", 9, "exact", 10)
    assert mixture["datasets"]["a"]["weight"] == 2.0
    assert len(info["build"]["config_sha256"]) == 64


def test_same_config_and_seed_give_the_same_mixture_and_seed_changes_it(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(40))
    config = f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n  size: 15\n"
    sql = "SELECT row FROM entries ORDER BY position"
    first = run_query(make_store(config, seed=1), sql)[1]
    assert first == run_query(make_store(config, seed=1), sql)[1]
    assert first != run_query(make_store(config, seed=2), sql)[1]
    assert len(set(first)) == 15
    replaced = run_query(make_store(config, seed=1, sampling="replacement"), sql)[1]
    assert len(replaced) == 15


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "parquet", "arrow", "folder"])
def test_local_formats(tmp_path: Path, make_store, fmt: str) -> None:
    rows = alpaca_rows(6)
    table = pa.Table.from_pylist(rows)
    target = tmp_path / f"data.{fmt}"
    if fmt == "json":
        target.write_text(json.dumps(rows))
    elif fmt == "jsonl":
        write_jsonl(target, rows)
    elif fmt == "csv":
        target.write_text("instruction,input,output\n" + "".join(f"{r['instruction']},,{r['output']}\n" for r in rows))
    elif fmt == "parquet":
        pq.write_table(table, target)
    elif fmt == "arrow":
        with pa.ipc.new_stream(target, table.schema) as writer:
            writer.write_table(table)
    else:
        target.mkdir()
        write_jsonl(target / "part-0.jsonl", rows[:3])
        write_jsonl(target / "part-1.jsonl", rows[3:])
    store = make_store(f"d:\n  path: {target}\n  source: local\n  converter: alpaca\n")
    with DataEngine(store) as engine:
        assert len(engine) == 6
        assert {engine[i]["messages"][1]["content"][0]["value"] for i in range(6)} == {f"answer {i}" for i in range(6)}


def test_text_files_load_with_the_text_builder(tmp_path: Path, make_store) -> None:
    data = tmp_path / "corpus.txt"
    data.write_text("first line\nsecond line\n")
    store = make_store(data)
    assert engine_samples(store) == [{"_dataset_name": "default", "text": "first line"},
                                   {"_dataset_name": "default", "text": "second line"}]


def test_hf_hub_source_on_a_local_folder_laid_out_like_a_hub_repo(tmp_path: Path, make_store) -> None:
    repo = tmp_path / "org__dataset"
    (repo / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(alpaca_rows(3)), repo / "data" / "train-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(alpaca_rows(2)), repo / "data" / "test-00000-of-00001.parquet")
    (repo / "README.md").write_text("# a dataset\n")
    store = make_store(f"hub:\n  path: {repo}\n  converter: alpaca\n")
    assert engine_length(store) == 3
    store = make_store(f"hub:\n  path: {repo}\n  split: test\n  converter: alpaca\n")
    assert engine_length(store) == 2
    files = store_info(store)["datasets"][0]["files"]
    assert {Path(f["path"]).name for f in files} == {"README.md", "train-00000-of-00001.parquet",
                                                      "test-00000-of-00001.parquet"}


def test_sliced_split_falls_back_to_loading_and_reads_the_right_rows(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(10))
    store = make_store(f"a:\n  path: {data}\n  source: local\n  split: train[4:7]\n  converter: alpaca\n")
    assert store_info(store)["datasets"][0]["arrow_files"] == []
    with DataEngine(store) as engine:
        assert ([s["messages"][0]["content"][0]["value"] for s in engine[:]]
                == ["question 4", "question 5", "question 6"])


BAD_INPUTS = {
    "missing file": ("a:\n  path: {tmp}/absent.json\n  source: local\n", SourceError,
                     "dataset 'a': file not found: {tmp}/absent.json"),
    "unknown extension": ("a:\n  path: {tmp}/rows.xml\n  source: local\n", SourceError,
                          "dataset 'a': unknown file extension of {tmp}/rows.xml"),
    "malformed json": ("a:\n  path: {tmp}/broken.jsonl\n  source: local\n", SourceError,
                       "dataset 'a': {tmp}/broken.jsonl: line 2, column 17: not valid JSON (Expecting value)"),
    "converter fails on a row": ("a:\n  path: {tmp}/images.jsonl\n  source: local\n  converter: alpaca\n",
                                 ConversionError,
                                 "dataset 'a', row 1, converter 'alpaca': MediaMismatch: more <image> placeholders"),
    "missing key in a row": ("a:\n  path: {tmp}/nofrom.jsonl\n  source: local\n  converter: sharegpt\n",
                             ConversionError, "dataset 'a', row 0, converter 'sharegpt': missing key 'from'"),
    "unknown converter": ("a:\n  path: {tmp}/ok.jsonl\n  source: local\n  converter: alpacca\n", ConfigError,
                          "dataset 'a': key 'converter': unknown converter 'alpacca'"),
    "unknown key": ("a:\n  path: {tmp}/ok.jsonl\n  source: local\n  szie: 3\n", ConfigError,
                    "dataset 'a': unknown key 'szie'"),
    "negative size": ("a:\n  path: {tmp}/ok.jsonl\n  source: local\n  size: -3\n", ConfigError,
                      "dataset 'a': key 'size' must be an integer >= 0, got -3"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_names_the_culprit_and_leaves_the_store_untouched(tmp_path: Path, case: str) -> None:
    (tmp_path / "rows.xml").write_text("<rows/>")
    (tmp_path / "broken.jsonl").write_text('{"instruction": "a", "output": "b"}\n{"instruction": \n')
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")  # row 0's media is recorded; row 1 fails to convert
    write_jsonl(tmp_path / "images.jsonl", [{"instruction": "<image>", "output": "x", "images": ["a.png"]},
                                            {"instruction": "<image><image>", "output": "y", "images": ["b.png"]}])
    write_jsonl(tmp_path / "nofrom.jsonl", [{"conversations": [{"value": "hi"}]}])
    ok = write_jsonl(tmp_path / "ok.jsonl", alpaca_rows(3))
    store = tmp_path / "store.db"
    build(write_yaml(tmp_path / "good.yaml", f"a:\n  path: {ok}\n  source: local\n  converter: alpaca\n"), store)
    before = digest(store)

    text, error, message = BAD_INPUTS[case]
    config = write_yaml(tmp_path / "bad.yaml", text.format(tmp=tmp_path))
    with pytest.raises(error) as caught:
        build(config, store)
    assert message.format(tmp=tmp_path) in str(caught.value)
    assert digest(store) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_a_store_never_appears_when_the_first_build_fails(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: {tmp_path}/absent.json\n  source: local\n")
    with pytest.raises(DataidxError):
        build(config, tmp_path / "new.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_rebuild_replaces_the_store_whole(tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    store = tmp_path / "s.db"
    build(config, store)
    write_jsonl(data, alpaca_rows(5))
    build(config, store)
    assert engine_length(store) == 5
    connection = sqlite3.connect(store)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()


def test_drops_are_counted_in_the_build_summary(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "chat.jsonl", [
        {"conversations": [{"from": "human", "value": "a"}, {"from": "bot", "value": "b"},
                           {"from": "gpt", "value": "c"}]},
    ])
    config = write_yaml(tmp_path / "c.yaml", f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n")
    summary = build(config, tmp_path / "s.db")
    assert [(d.name, d.rows, d.entries, d.drops) for d in summary.datasets] == [("chat", 1, 1, 1)]
    assert store_info(tmp_path / "s.db")["datasets"][0]["drops"] == 1


def test_what_the_build_recorded_is_not_logged_again_at_fetch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = write_jsonl(tmp_path / "chat.jsonl", [
        {"conversations": [{"from": "human", "value": f"q{i}"}, {"from": "bot", "value": "?"},
                           {"from": "gpt", "value": f"a{i}"}]} for i in range(50)])
    config = write_yaml(tmp_path / "c.yaml", f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n")
    build(config, tmp_path / "s.db")
    with DataEngine(tmp_path / "s.db") as engine:
        with caplog.at_level("WARNING"):
            samples = [engine[i] for i in range(len(engine))] + engine[0:len(engine)]
        assert len(samples) == 100 and not caplog.records  # 50 rows lost a message; the build counted them
        result = CliRunner().invoke(cli, ["info", str(tmp_path / "s.db")])
        header, _, line = result.output.splitlines()[3:6]
        assert "dropped messages" in header and line.split()[:6] == ["chat", "sharegpt", "50", "50", "50", "0"]


def test_a_drop_the_build_did_not_record_is_logged_once_per_dataset(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    from dataidx.convert import converters, drop, register_converter

    def qa(row: dict) -> dict:
        return {"messages": [{"role": "user", "content": [{"type": "text", "value": row["q"]}], "loss_weight": 0.0},
                             {"role": "assistant", "content": [{"type": "text", "value": row["a"]}],
                              "loss_weight": 1.0}]}

    def qa_changed(row: dict) -> dict:  # the same converter, later: it now leaves something out
        drop("the hint is not JSON")
        return qa(row)

    rows = [{"q": f"q{i}", "a": f"a{i}"} for i in range(20)]
    yaml = "".join(f"{name}:\n  path: {write_jsonl(tmp_path / f'{name}.jsonl', rows)}\n"
                   "  source: local\n  converter: qa_test\n"
                   for name in ("first", "second"))
    register_converter("qa_test")(qa)
    try:
        build(write_yaml(tmp_path / "c.yaml", yaml), tmp_path / "s.db")
        with pytest.warns(UserWarning, match="registered again"):
            register_converter("qa_test")(qa_changed)
        with DataEngine(tmp_path / "s.db") as engine:
            with caplog.at_level("WARNING"):
                [engine[i] for i in range(len(engine))]
                engine_samples(tmp_path / "s.db")[0:len(engine)]  # another reader in the same process
            warned = [r.getMessage() for r in caplog.records]
            assert len(warned) == 2 and "dataset 'first' row 0" in warned[0] and "dataset 'second' row 0" in warned[1]
            assert "the hint is not JSON" in warned[0] and "did not record" in warned[0]
    finally:
        converters._plugins.pop("qa_test", None)


def test_build_refuses_to_overwrite_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    config = write_yaml(tmp_path / "c.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    before = data.read_bytes()
    result = CliRunner().invoke(cli, ["build", str(config), "-o", str(data)])
    assert result.exit_code == 1 and "exists and is not a dataidx store; refusing to overwrite it" in result.stderr
    assert data.read_bytes() == before

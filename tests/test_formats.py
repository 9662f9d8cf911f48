"""More formats without code: the ``columns`` rename map and the ``openai`` converter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataidx import DataEngine
from dataidx.config import load_config
from dataidx.convert import convert_row, converters
from dataidx.errors import ConfigError, ConversionError, SourceError

from .helpers import GOLDEN, SHARED_DATA, alpaca_rows, engine_samples, requires_shared, write_jsonl


def test_columns_map_source_names_to_what_the_converter_expects(tmp_path: Path, make_store) -> None:
    rows = alpaca_rows(30)
    write_jsonl(tmp_path / "std.jsonl", rows)
    write_jsonl(tmp_path / "odd.jsonl", [{"question": r["instruction"], "context": r["input"], "answer": r["output"],
                                          "output": "not this one"} for r in rows])
    standard = make_store(f"qa:\n  path: {tmp_path / 'std.jsonl'}\n  source: local\n  converter: alpaca\n")
    renamed = make_store(
        f"qa:\n  path: {tmp_path / 'odd.jsonl'}\n  source: local\n  converter: alpaca\n"
        "  columns: {instruction: question, input: context, output: answer}\n"
    )
    expected, got = engine_samples(standard), engine_samples(renamed)
    assert len(got) == len(expected) == 30
    assert got == expected  # "answer" replaced the unrenamed "output" column


def test_columns_map_with_the_row_path(tmp_path: Path, make_store) -> None:
    # sharegpt with a renamed conversation column and a malformed call: the row path and the fast
    # path both see the renamed names.
    turns = [{"from": "human", "value": "hi"}, {"from": "function_call", "value": "{bad"},
             {"from": "gpt", "value": "hello"}]
    write_jsonl(tmp_path / "chat.jsonl", [{"dialogue": turns}] * 3)
    store = make_store(f"chat:\n  path: {tmp_path / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n"
                       "  columns: {conversations: dialogue}\n")
    with DataEngine(store) as engine:
        assert len(engine) == 3
        assert [m["role"] for m in engine[0]["messages"]] == ["user", "assistant"]


def test_bad_columns_are_named(tmp_path: Path, make_store) -> None:
    write_jsonl(tmp_path / "qa.jsonl", alpaca_rows(2))
    config = tmp_path / "c.yaml"
    config.write_text(f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  columns: [a, b]\n"
                      f"qb:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  columns: {{a: x, b: x}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert "dataset 'qa': key 'columns' must map" in str(caught.value)
    assert "dataset 'qb': key 'columns': source column 'x' is given more than once" in str(caught.value)
    with pytest.raises(SourceError, match="dataset 'qa': key 'columns': source column\\(s\\) 'question' not found "
                                          "\\(columns: instruction, input, output\\)"):
        make_store(f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n"
                   "  columns: {instruction: question}\n")


def test_openai_converter_with_media_and_tool_calls() -> None:
    convert = converters.get("openai").func
    sample = convert({
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "<image>Who is this?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"face\"}"}}]},
            {"role": "tool", "content": "{\"name\": \"Muller\"}"},
            {"role": "assistant", "content": "Thomas Muller."},
        ],
        "images": ["1.jpg"],
        "tools": [{"name": "lookup"}],
    })
    roles = [(m["role"], m["loss_weight"]) for m in sample["messages"]]
    assert roles == [("system", 0.0), ("user", 0.0), ("assistant", 1.0), ("tool", 0.0), ("assistant", 1.0)]
    assert sample["messages"][1]["content"] == [{"type": "image_url", "value": "1.jpg"},
                                                {"type": "text", "value": "Who is this?"}]
    call = json.loads(sample["messages"][2]["content"][0]["value"])
    assert call == {"name": "lookup", "arguments": {"q": "face"}}
    assert json.loads(sample["tools"]) == [{"name": "lookup"}]
    for bad, message in [({"messages": [{"role": "robot", "content": "x"}]}, "role must be one of"),
                         ({"messages": [{"role": "user", "content": "<image>"}]}, "placeholders than files"),
                         ({"messages": [{"role": "user", "content": ["x"]}]}, "content must be a string")]:
        with pytest.raises(ConversionError, match=message):
            convert_row(convert, bad, "d", 7, "openai")


@requires_shared
def test_openai_converter_reads_llamafactory_mllm_demo_as_v1_does(tmp_path: Path, make_store) -> None:
    store = make_store(f"mllm:\n  path: {SHARED_DATA / 'mllm_demo.json'}\n  source: local\n  converter: openai\n")
    with DataEngine(store) as engine:
        golden = [json.loads(line) for line in (GOLDEN / "v1_multimodal_demo.samples.jsonl").open()]
        source = json.loads((SHARED_DATA / "mllm_demo.json").read_text())
        for number in range(len(source)):  # v1's multimodal demo is the same conversations, paths under data/
            row = engine.reader.sample(1, number, None)["messages"]
            want = golden[number]["messages"]
            assert [m["role"] for m in row] == [m["role"] for m in want]
            for ours, theirs in zip(row, want):
                assert [(b["type"], b["value"].removeprefix("data/")) for b in theirs["content"]] == \
                    [(b["type"], b["value"]) for b in ours["content"]]
        assert len(engine) == sum(sum(m["role"] == "assistant" for m in r["messages"]) for r in source)


def test_rows_datasets_stores_as_json_text_read_back_as_ds_i_does(tmp_path: Path, make_store) -> None:
    # Messages whose keys differ: datasets 5 stores them as arrow.json text; v1's ds[i] parses it.
    messages = [{"role": "user", "name": "bob", "content": [{"type": "text", "value": "q"}]},
                {"role": "assistant", "content": [{"type": "text", "value": "a"}], "loss_weight": 1.0}]
    write_jsonl(tmp_path / "mixed.jsonl", [{"messages": messages}] * 3)
    store = make_store(f"mixed:\n  path: {tmp_path / 'mixed.jsonl'}\n  source: local\n")
    with DataEngine(store) as engine:
        assert len(engine) == 3
        assert engine[0]["messages"] == messages

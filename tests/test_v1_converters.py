"""Issue 52, items 1 and 2: ``pair`` keeps ``tools`` and ``alpaca`` keeps placeholders written in
``system`` or ``output`` as text, as LLaMA-Factory v1's converters do. Each row is compared with
v1's own converter, imported from its source when DATAIDX_LLAMAFACTORY names it (ff6d4d12's src),
else with its output transcribed below from that run (v1/plugins/data_plugins/converter.py,
``pair_converter`` and ``alpaca_converter``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.convert import MediaMismatch, collecting_drops, converters
from dataidx.errors import InvalidRow

from .conformance.v1 import v1_converter
from .helpers import write_jsonl, write_yaml

Q = [{"role": "user", "content": "Weather in Paris?"}]
CALL = '{"name": "weather", "arguments": {"city": "Paris"}}'
SCHEMA = '[{"name":  "weather", "parameters": {"type": "object"}}]'  # v1 re-serialises it: one space


def msg(role: str, weight: float, *blocks: tuple[str, str]) -> dict[str, Any]:
    return {"role": role, "content": [{"type": kind, "value": value} for kind, value in blocks], "loss_weight": weight}


def text(value: str) -> tuple[str, str]:
    return ("text", value)


USER = msg("user", 0.0, text("Weather in Paris?"))
SUNNY = msg("assistant", 1.0, text("Sunny."))

#: (converter, row, v1's sample, what dataidx drops where v1 only logs a warning)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("pair", {"chosen": [*Q, {"role": "assistant", "content": "Sunny."}],
              "rejected": [*Q, {"role": "assistant", "content": "No idea."}], "tools": SCHEMA},
     {"chosen_messages": [USER, SUNNY], "rejected_messages": [USER, msg("assistant", 1.0, text("No idea."))],
      "tools": '[{"name": "weather", "parameters": {"type": "object"}}]'}, []),
    ("pair", {"chosen": [*Q, {"role": "tool", "content": CALL}, {"role": "assistant", "content": "Sunny."}],
              "rejected": Q, "tools": "[]"},
     {"chosen_messages": [USER, msg("tool", 0.0, ("tool_call", CALL)), SUNNY], "rejected_messages": [USER],
      "tools": "[]"}, []),
    ("pair", {"chosen": Q, "rejected": Q, "tools": '{"name": "weather"}'},
     {"chosen_messages": [USER], "rejected_messages": [USER], "tools": '{"name": "weather"}'}, []),
    ("pair", {"chosen": Q, "rejected": Q, "tools": "{broken"},  # v1: "Invalid tools format" warning
     {"chosen_messages": [USER], "rejected_messages": [USER]}, ["tools is not valid JSON"]),
    ("pair", {"chosen": Q, "rejected": Q, "tools": ""}, {"chosen_messages": [USER], "rejected_messages": [USER]}, []),
    ("alpaca", {"system": "Answer with <image> tags kept.", "instruction": "What is <image>?", "input": "",
                "output": "A cat, see <image>, <video> and <audio>.", "images": ["cat.jpg"]},
     {"messages": [msg("system", 0.0, text("Answer with <image> tags kept.")),
                   msg("user", 0.0, text("What is "), ("image_url", "cat.jpg"), text("?")),
                   msg("assistant", 1.0, text("A cat, see <image>, <video> and <audio>."))]}, []),
    ("alpaca", {"system": "<image>", "instruction": "q", "output": "<audio>"},
     {"messages": [msg("system", 0.0, text("<image>")), msg("user", 0.0, text("q")),
                   msg("assistant", 1.0, text("<audio>"))]}, []),
]

#: Rows v1 refuses (its exception type), and dataidx's refusal.
REFUSED: list[tuple[str, dict[str, Any], str, type[Exception], str]] = [
    ("pair", {"chosen": Q, "rejected": Q, "tools": [{"name": "weather"}]}, "TypeError", InvalidRow,
     "key 'tools' is a list, not JSON text"),
    ("alpaca", {"system": "<image>", "instruction": "q", "output": "a", "images": ["x.jpg"]}, "ValueError",
     MediaMismatch, "1 files in column 'images' but only 0 <image> placeholders"),
]


def v1_source() -> Path | None:
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    return Path(source) if source else None


@pytest.mark.parametrize(("name", "row", "transcribed", "drops"), CASES)
def test_converters_keep_what_v1_keeps(name: str, row: dict, transcribed: dict, drops: list[str]) -> None:
    source = v1_source()
    expected = v1_converter(source, name)(json.loads(json.dumps(row))) if source else transcribed
    with collecting_drops() as dropped:
        assert converters.get(name).func(row) == expected
    assert dropped == drops


@pytest.mark.parametrize(("name", "row", "v1_error", "error", "message"), REFUSED)
def test_rows_v1_refuses_are_refused(name: str, row: dict, v1_error: str, error: type[Exception],
                                     message: str) -> None:
    if source := v1_source():
        with pytest.raises(Exception) as caught:
            v1_converter(source, name)(row)
        assert type(caught.value).__name__ == v1_error
    with pytest.raises(error, match=message):
        converters.get(name).func(row)


def test_pair_tools_are_stored_served_and_rendered_with_each_side(tmp_path: Path, make_store) -> None:
    """Both sides render with the tools, as v1's Renderer passes ``json.loads(tools)`` to each
    (core/rendering/rendering.py, ``process_samples``), whichever path the build took."""
    pytest.importorskip("transformers")
    from dataidx.render import BUILTIN_TEMPLATES, Renderer, chat_messages

    from .helpers import train_tokenizer

    rows = [case[1] for case in CASES if case[0] == "pair"]
    store = make_store(f"prefs:\n  path: {write_jsonl(tmp_path / 'p.jsonl', rows)}\n  source: local\n"
                       "  converter: pair\n")
    with DataEngine(store) as engine:
        served = [engine[n] for n in range(len(engine))]
    assert served == [{"_dataset_name": "prefs", **case[2]} for case in CASES if case[0] == "pair"]
    tokenizer, template = train_tokenizer(), BUILTIN_TEMPLATES["chatml"]
    sides = Renderer(tokenizer, template, cutoff=4096).render(served[0], has_cut=False).as_dict()
    for side in ("chosen", "rejected"):
        expected = tokenizer.apply_chat_template(chat_messages(served[0][f"{side}_messages"]),
                                                 tools=json.loads(SCHEMA), chat_template=template, tokenize=False)
        assert '"weather"' in expected
        assert tokenizer.decode(sides[side]["input_ids"]) == expected


def test_a_pair_row_with_tools_not_json_text_is_one_line_naming_dataset_row_and_key(tmp_path: Path) -> None:
    rows = [{"chosen": Q, "rejected": Q, "tools": []},  # empty: none, as in v1
            {"chosen": Q, "rejected": Q, "tools": [{"name": "weather"}]}]
    config = write_yaml(tmp_path / "c.yaml", f"prefs:\n  path: {write_jsonl(tmp_path / 'p.jsonl', rows)}\n"
                                             "  source: local\n  converter: pair\n")
    result = CliRunner().invoke(cli, ["build", str(config), "-o", str(tmp_path / "s.db"), "-q"])
    assert (result.exit_code, result.output) == (1, (
        "Error: dataset 'prefs', row 1, converter 'pair': key 'tools' is a list, not JSON text: v1's pair "
        "converter reads it with json.loads, so write the list of tool schemas as a JSON string\n")), result.output
    assert not (tmp_path / "s.db").exists()


def test_alpaca_rows_with_placeholders_in_system_or_output_build(tmp_path: Path, make_store) -> None:
    rows = [case[1] for case in CASES if case[0] == "alpaca" and "images" not in case[1]] * 3
    store = make_store(f"qa:\n  path: {write_jsonl(tmp_path / 'a.jsonl', rows)}\n  source: local\n"
                       "  converter: alpaca\n")
    with DataEngine(store) as engine:
        assert len(engine) == 3
        assert engine[2]["messages"] == CASES[-1][2]["messages"]

"""Converters and expansion on rows written in the test: v1's rules, media, drops and errors."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.convert import MediaMismatch, collecting_drops, converters, cuts, register_converter, truncate
from dataidx.errors import PluginError

from .helpers import examples


def text(value: str) -> list[dict]:
    return [{"type": "text", "value": value}]


def test_alpaca_with_system_and_input_concatenates_without_separator() -> None:
    sample = converters.get("alpaca").func({"system": "S", "instruction": "Do: ", "input": "x", "output": "y"})
    assert sample == {
        "messages": [
            {"role": "system", "content": text("S"), "loss_weight": 0.0},
            {"role": "user", "content": text("Do: x"), "loss_weight": 0.0},
            {"role": "assistant", "content": text("y"), "loss_weight": 1.0},
        ]
    }


def test_null_columns_count_as_absent() -> None:
    sample = converters.get("alpaca").func({"system": None, "instruction": "q", "input": None, "output": "a"})
    assert [m["role"] for m in sample["messages"]] == ["user", "assistant"]
    assert sample["messages"][0]["content"] == text("q")


def test_media_placeholders_split_text_in_document_order() -> None:
    row = {"instruction": "<image>Compare with <image> please", "output": "same", "images": ["a.jpg", "b.jpg"]}
    user = converters.get("alpaca").func(row)["messages"][0]
    assert user["content"] == [
        {"type": "image_url", "value": "a.jpg"},
        {"type": "text", "value": "Compare with "},
        {"type": "image_url", "value": "b.jpg"},
        {"type": "text", "value": " please"},
    ]


def test_media_string_column_and_audio_video() -> None:
    row = {"conversations": [{"from": "human", "value": "<video><audio>what?"}, {"from": "gpt", "value": "x"}],
           "videos": "v.mp4", "audios": ["s.wav"]}
    content = converters.get("sharegpt").func(row)["messages"][0]["content"]
    assert content == [{"type": "video_url", "value": "v.mp4"}, {"type": "audio_url", "value": "s.wav"},
                       {"type": "text", "value": "what?"}]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"instruction": "<image><image>", "output": "a", "images": ["one.jpg"]}, "more <image> placeholders"),
        ({"instruction": "no tag", "output": "a", "images": ["one.jpg"]}, "only 0 <image> placeholders"),
        ({"instruction": "<audio>", "output": "a"}, "more <audio> placeholders than files"),
    ],
)
def test_media_mismatch_is_an_error(row: dict, message: str) -> None:
    with pytest.raises(MediaMismatch, match=message):
        converters.get("alpaca").func(row)


def test_sharegpt_roles_tool_calls_and_tools() -> None:
    call = {"name": "f", "arguments": {"x": 1}}
    row = {
        "conversations": [
            {"from": "system", "value": "sys"},
            {"from": "human", "value": "hi"},
            {"from": "function_call", "value": json.dumps([call, call])},
            {"from": "observation", "value": "{}"},
            {"from": "gpt", "value": "done"},
        ],
        "tools": '[{"name":  "f"}]',
    }
    sample = converters.get("sharegpt").func(row)
    assert [(m["role"], m["loss_weight"]) for m in sample["messages"]] == [
        ("system", 0.0), ("user", 0.0), ("assistant", 1.0), ("tool", 0.0), ("assistant", 1.0)
    ]
    assert sample["messages"][2]["content"] == [{"type": "tool_call", "value": json.dumps(call)}] * 2
    assert sample["tools"] == '[{"name": "f"}]'


def test_sharegpt_drops_like_v1_and_reports_them() -> None:
    row = {
        "conversations": [
            {"from": "human", "value": "hi"},
            {"from": "narrator", "value": "meanwhile"},
            {"from": "function_call", "value": "{not json"},
            {"from": "gpt", "value": "ok"},
        ],
        "tools": "{broken",
    }
    with collecting_drops() as drops:
        sample = converters.get("sharegpt").func(row)
    assert [m["role"] for m in sample["messages"]] == ["user", "assistant"]
    assert "tools" not in sample
    assert drops == ["unsupported role tag 'narrator'", "function_call value is not valid JSON",
                     "tools is not valid JSON"]


def test_pair_tool_messages_become_tool_call_blocks() -> None:
    row = {
        "chosen": [{"role": "user", "content": "q"}, {"role": "tool", "content": '{"name": "f"}'},
                   {"role": "assistant", "content": "a"}],
        "rejected": [{"role": "user", "content": "q"}, {"role": "tool", "content": "nope"},
                     {"role": "assistant", "content": "b"}],
    }
    with collecting_drops() as drops:
        sample = converters.get("pair").func(row)
    assert sample["chosen_messages"][1] == {"role": "tool",
                                            "content": [{"type": "tool_call", "value": '{"name": "f"}'}],
                                            "loss_weight": 0.0}
    assert [m["role"] for m in sample["rejected_messages"]] == ["user", "assistant"]
    assert drops == ["tool message content is not valid JSON"]


def test_pair_each_side_owns_the_media() -> None:
    row = {"chosen": [{"role": "user", "content": "<image>a"}, {"role": "assistant", "content": "x"}],
           "rejected": [{"role": "user", "content": "<image>a"}, {"role": "assistant", "content": "y"}],
           "images": ["p.png"]}
    sample = converters.get("pair").func(row)
    assert sample["chosen_messages"][0]["content"][0] == {"type": "image_url", "value": "p.png"}
    assert sample["rejected_messages"][0]["content"][0] == {"type": "image_url", "value": "p.png"}


@pytest.mark.parametrize(
    ("roles_weights", "expected"),
    [
        ([("user", 0.0), ("assistant", 1.0), ("user", 0.0), ("assistant", 1.0)], [2, 4]),
        ([("user", 0.0), ("assistant", 0.0), ("user", 0.0), ("assistant", 1.0)], [4]),
        ([("user", 0.0), ("assistant", None)], [2]),
        ([("user", 0.0), ("assistant", 1e-7)], [None]),
        ([("system", 1.0), ("user", 1.0)], [None]),
        ([], [None]),
    ],
)
def test_cuts_follow_v1(roles_weights: list, expected: list) -> None:
    messages = []
    for role, weight in roles_weights:
        message = {"role": role, "content": text("x")}
        if weight is not None:
            message["loss_weight"] = weight
        messages.append(message)
    assert cuts({"messages": messages}) == expected


def test_preference_samples_are_one_entry_and_truncate_keeps_other_keys() -> None:
    assert cuts({"chosen_messages": [], "rejected_messages": []}) == [None]
    sample = {"messages": [1, 2, 3, 4], "tools": "[]"}
    assert truncate(sample, 2) == {"messages": [1, 2], "tools": "[]"}
    assert truncate(sample, None) is sample


def test_registering_a_user_converter_and_replacing_warns() -> None:
    @register_converter("test_upper", version="3")
    def upper(row: dict) -> dict:
        return {"messages": [{"role": "assistant", "content": text(row["t"].upper())}]}

    assert converters.get("test_upper").version == "3"
    with pytest.warns(UserWarning, match="registered again"):
        register_converter("test_upper", version="4")(upper)
    assert converters.get("test_upper").version == "4"


def test_unknown_converter_lists_the_known_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown converter 'nope' \(known: .*alpaca.*pair.*sharegpt"):
        converters.get("nope")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "alpaca" in converters


_TEXTS = st.sampled_from(["hi", "", "a <image> b", "<image><image>", "plain words", "{}", "x < y"])
_CALLS = st.sampled_from(['{"name": "f", "arguments": {"x": 1}}', '[{"name": "f"}, {"name": "g"}]',
                          '{"name":  "f" }', "{not json", "3", '"text"'])


@st.composite
def _conversation_rows(draw: st.DrawFn) -> dict:
    """sharegpt rows with every kind of turn: known tags, unknown ones (dropped), function calls
    valid and not (dropped), media placeholders paired with files, tools valid and not."""
    turns = []
    for _ in range(draw(st.integers(0, 9))):
        tag = draw(st.sampled_from(["system", "human", "gpt", "observation", "function_call", "narrator"]))
        turns.append({"from": tag, "value": draw(_CALLS if tag == "function_call" else _TEXTS)})
    row: dict = {"conversations": turns}
    images = sum(turn["value"].count("<image>") for turn in turns if turn["from"] not in ("function_call", "narrator"))
    if images:
        row["images"] = [f"{n}.png" for n in range(images)]
    row["tools"] = draw(st.sampled_from([None, "", "[]", '[{"name":  "f"}]', "{broken"]))
    return row


@st.composite
def _openai_rows(draw: st.DrawFn) -> dict:
    turns = []
    for _ in range(draw(st.integers(0, 9))):
        turn: dict = {"role": draw(st.sampled_from(["system", "user", "assistant", "tool"])),
                      "content": draw(st.one_of(st.none(), _TEXTS))}
        if turn["role"] == "assistant" and draw(st.booleans()):
            turn["tool_calls"] = [{"function": {"name": "f", "arguments": draw(st.sampled_from(['{"x":  1}', "{}"]))}}]
        turns.append(turn)
    row: dict = {"messages": turns}
    images = sum((turn["content"] or "").count("<image>") for turn in turns)
    if images:
        row["images"] = [f"{n}.png" for n in range(images)]
    if draw(st.booleans()):
        row["tools"] = draw(st.sampled_from(['[{"name": "f"}]', [{"name": "f"}]]))
    return row


@given(st.one_of(st.tuples(st.just("sharegpt"), _conversation_rows()), st.tuples(st.just("openai"), _openai_rows())))
@settings(max_examples=examples(300), deadline=None)
def test_a_converters_prefix_is_its_sample_cut(case: tuple[str, dict]) -> None:
    # A fetch of a cut entry converts only the messages it keeps: for every cut, the same sample
    # as converting the whole row and cutting it (what v1 does), tools and other keys included.
    name, row = case
    plugin = converters.get(name)
    assert plugin.prefix is not None
    with collecting_drops():
        whole = plugin.func(row)
        for cut in range(1, len(whole["messages"]) + 2):
            assert plugin.prefix(row, cut) == {**whole, "messages": whole["messages"][:cut]}, cut

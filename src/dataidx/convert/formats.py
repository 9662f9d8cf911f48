"""The built-in converters, exactly as LLaMA-Factory v1's: alpaca, sharegpt, pair, openai, none; and
``text``, pretraining documents as LLaMA-Factory's ``pt`` stage reads them (v1 has none).

Each registers with its vectorised cut path (:mod:`.vectorised`), which the build uses over whole
Arrow tables; tests/test_golden.py checks every output against v1's own.
"""

from __future__ import annotations

import json
from typing import Any, cast

from ..errors import InvalidRow, shown
from . import json_text
from .documents import standard_cuts, text_cuts
from .expansion import ROLES, kind_of
from .media import MediaSplitter, text_blocks
from .registry import converters, drop, present
from .samples import Content, Message, PairSample, Sample, SFTSample, TextSample
from .vectorised import alpaca_cuts, pair_cuts, sharegpt_cuts

_NOT_JSON = (json.JSONDecodeError, TypeError)


def loads(value: Any, what: str) -> Any:
    """JSON text from data; InvalidRow (the row's reject) when it nests past the interpreter's
    recursion limit, which would otherwise abort the whole build."""
    try:
        return json_text.loads(value)
    except RecursionError:
        raise InvalidRow(f"{what} is JSON nested too deep to read") from None


def _tool_call_blocks(value: str, what: str) -> list[Content] | None:
    """JSON tool call(s) as ``tool_call`` blocks; None when the value is not valid JSON."""
    try:
        calls = loads(value, what)
    except _NOT_JSON:
        return None
    if not isinstance(calls, list):
        calls = [calls]
    return [{"type": "tool_call", "value": json_text.dumps(call)} for call in calls]


def tool_call_blocks(value: str) -> list[Content] | None:
    """A function_call turn's blocks as the sharegpt converter makes them; None when the value is
    not valid JSON (the converter drops the turn)."""
    return _tool_call_blocks(value, "a function_call value")


@converters.register("alpaca", version="2", fast=alpaca_cuts)
def alpaca(raw: dict[str, Any]) -> SFTSample:
    """``system``/``instruction``+``input``/``output`` -> system, user and assistant messages.

    As v1's ``alpaca_converter``, only the user text's placeholders take media: ``<image>`` in
    ``system`` or ``output`` is text (version 1 split those too, and refused a row without files).
    """
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages = []
    if "system" in row:
        messages.append({"role": "system", "content": [{"type": "text", "value": row["system"]}], "loss_weight": 0.0})
    if "instruction" in row or "input" in row:
        # v1 concatenates with no separator; keep it identical.
        text = row.get("instruction", "") + row.get("input", "")
        messages.append({"role": "user", "content": text_blocks(media, text), "loss_weight": 0.0})
    if "output" in row:
        messages.append({"role": "assistant", "content": [{"type": "text", "value": row["output"]}],
                         "loss_weight": 1.0})
    if media is not None:
        media.finish()
    return {"messages": messages}


_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "gpt": "assistant",
    "observation": "tool",
    "function_call": "assistant",
}


def _sharegpt(raw: dict[str, Any], cut: int | None) -> SFTSample:
    """:func:`sharegpt`, or with ``cut`` its first ``cut`` messages (its prefix: a fetch of a cut
    entry converts no further)."""
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages: list[Message] = []
    for turn in row.get("conversations") or []:
        if len(messages) == cut:
            break  # a cut entry's prefix: the build converted the whole row, so the rest is known good
        tag = turn["from"]
        if tag == "function_call":
            blocks = _tool_call_blocks(turn["value"], "a function_call value")
            if blocks is None:
                drop("function_call value is not valid JSON")
                continue
            messages.append({"role": "assistant", "content": blocks, "loss_weight": 1.0})
        elif tag in _SHAREGPT_ROLES:
            messages.append({
                "role": _SHAREGPT_ROLES[tag],
                "content": text_blocks(media, turn["value"]),
                "loss_weight": 1.0 if tag == "gpt" else 0.0,
            })
        else:
            drop(f"unsupported role tag {shown(tag)}")
    if media is not None and cut is None:
        media.finish()
    sample: SFTSample = {"messages": messages}
    tools = _tools(row)
    if tools is not None:
        sample["tools"] = tools
    return sample


def _tools(row: dict[str, Any]) -> str | None:
    """A row's ``tools`` as v1's sharegpt and pair converters keep them: any valid JSON, "[]"
    included, re-serialised; None when absent or empty, or (a drop) when not valid JSON."""
    tools = row.get("tools")
    if not tools:
        return None
    try:
        return json_text.dumps(loads(tools, "tools"))
    except _NOT_JSON:
        drop("tools is not valid JSON")
        return None


@converters.register("sharegpt", version="1", fast=sharegpt_cuts, prefix=_sharegpt)
def sharegpt(raw: dict[str, Any]) -> SFTSample:
    """``conversations`` of from/value turns -> messages; only gpt and function_call are supervised."""
    return _sharegpt(raw, None)


def _openai_messages(turns: list[dict[str, Any]], media: MediaSplitter | None) -> list[Message]:
    messages = []
    for turn in turns:
        role = turn["role"]
        if role == "tool":
            blocks = _tool_call_blocks(turn["content"], "a tool message's content")
            if blocks is None:
                drop("tool message content is not valid JSON")
                continue
        else:
            blocks = text_blocks(media, turn["content"])
        messages.append({"role": role, "content": blocks, "loss_weight": 1.0 if role == "assistant" else 0.0})
    return messages


@converters.register("pair", version="2", fast=pair_cuts)
def pair(raw: dict[str, Any]) -> PairSample:
    """``chosen``/``rejected`` role-content lists -> preference sample; each side owns the media.
    ``tools`` is kept as v1's ``pair_converter`` keeps it (version 1 dropped it)."""
    row = present(raw)
    wrong = [key for key in ("chosen", "rejected")
             if row.get(key) and not isinstance(row[key], list)]  # "" is none, as in v1
    if wrong:
        raise InvalidRow(_not_message_lists(row, wrong))
    if row.get("tools") and not isinstance(row["tools"], str):  # v1's json.loads fails on it (TypeError)
        raise InvalidRow(f"key 'tools' is {kind_of(row['tools'])}, not JSON text: v1's pair converter reads "
                         "it with json.loads, so write the list of tool schemas as a JSON string")
    sides: dict[str, list[Message]] = {}
    for key in ("chosen", "rejected"):
        media = MediaSplitter.for_row(row)
        sides[key] = _openai_messages(row.get(key) or [], media)
        if media is not None:
            media.finish()
    sample: PairSample = {"chosen_messages": sides["chosen"], "rejected_messages": sides["rejected"]}
    tools = _tools(row)
    if tools is not None:
        sample["tools"] = tools
    return sample


def _not_message_lists(row: dict[str, Any], wrong: list[str]) -> str:
    """Why ``row[key]`` for each key of ``wrong`` is not a pair side, and what one looks like."""
    names, kinds = " and ".join(wrong), {type(row[key]).__name__ for key in wrong}
    example = 'e.g. chosen: [{"role": "user", "content": "<prompt>"}, {"role": "assistant", "content": "<answer>"}]'
    if kinds in ({"str"}, {"dict"}):  # dpo_en_demo.json's sides are {from, value} messages
        what = "strings" if kinds == {"str"} else "single messages"
        return (f"{names} {'are' if len(wrong) > 1 else 'is'} {what if len(wrong) > 1 else 'a ' + what[:-1]}: "
                "ranking data in LLaMA-Factory v0's shape (single answers); v1's pair converter needs each side "
                f"as a list of {{role, content}} messages, the prompt included ({example})")
    return f"{names} must be a list of {{role, content}} messages, got {'/'.join(sorted(kinds))} ({example})"


def _openai(raw: dict[str, Any], cut: int | None) -> SFTSample:
    """:func:`openai`, or with ``cut`` its first ``cut`` messages (its prefix)."""
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages = []
    for number, turn in enumerate(row.get("messages") or []):
        if number == cut:
            break  # a cut entry's prefix (every turn is one message): the build checked the rest
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) or turn["role"] not in ROLES:
            raise InvalidRow(f"message {number}: role must be one of {', '.join(ROLES)}")
        content = turn.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"message {number}: content must be a string, got {type(content).__name__}")
        blocks = text_blocks(media, content) if content else []
        for call in turn.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else None
            if not isinstance(function, dict) or "name" not in function:
                raise ValueError(f"message {number}: a tool call needs a function name")
            arguments = function.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = loads(arguments, f"message {number}: tool call arguments")
                except json.JSONDecodeError:
                    raise ValueError(f"message {number}: tool call arguments are not valid JSON") from None
            blocks.append({"type": "tool_call",
                           "value": json_text.dumps({"name": function["name"], "arguments": arguments})})
        if not blocks:
            blocks = [{"type": "text", "value": ""}]
        role = turn["role"]
        messages.append({"role": role, "content": blocks, "loss_weight": 1.0 if role == "assistant" else 0.0})
    if media is not None and cut is None:
        media.finish()
    sample: SFTSample = {"messages": messages}
    if row.get("tools"):
        tools = row["tools"]
        sample["tools"] = tools if isinstance(tools, str) else json_text.dumps(tools)
    return sample


@converters.register("openai", version="1", prefix=_openai)
def openai(raw: dict[str, Any]) -> SFTSample:
    """OpenAI-style ``messages`` of ``{role, content: str, tool_calls?}`` (LLaMA-Factory's
    ``mllm_demo.json`` shape, media placeholders and ``images`` included) -> standard messages;
    assistant messages are supervised, others not."""
    return _openai(raw, None)


#: What a KTO row's ``extra_info`` says: ``{"kto_label": true}`` for a desirable answer.
KTO_LABEL = "kto_label"


@converters.register("kto", version="1")
def kto(raw: dict[str, Any]) -> SFTSample:
    """A KTO row (LLaMA-Factory's ``kto_en_demo.json``: OpenAI-shaped ``messages`` and a boolean
    ``label``, whether the answer is desirable) -> one entry training its last assistant turn,
    the label as v1's ``extra_info`` (``{"kto_label": true}``, JSON text), which a KTO loss reads
    per entry. Earlier assistant turns are the prompt's: v1 has no KTO, so this follows TRL's
    ``KTOTrainer``, whose completion is the last answer. A label that is not true or false is
    refused: ``"false"`` as text would train an undesirable answer as desirable."""
    label = raw.get("label")
    if not isinstance(label, bool):
        raise InvalidRow(f"key 'label' is {'missing' if label is None else kind_of(label)}, not true or false: a KTO "
                         "label says whether the row's answer is desirable")
    sample = _openai(raw, None)
    messages = sample["messages"]
    last = max((number for number, message in enumerate(messages) if message["role"] == "assistant"), default=None)
    for number, message in enumerate(messages):
        if message["role"] == "assistant" and number != last:
            message["loss_weight"] = 0.0
    sample["extra_info"] = json_text.dumps({KTO_LABEL: label})
    return sample


@converters.register("text", version="1", fast=text_cuts)
def text(raw: dict[str, Any]) -> TextSample:
    """A row's ``text`` column -> a text document, trained whole with EOS appended (LLaMA-Factory's
    ``pt`` stage, whose ``dataset_info.json`` maps ``text`` to its prompt). A null text is empty: the
    row trains nothing, as a row without a supervised turn; text of another type is refused."""
    value = raw["text"]
    if value is not None and not isinstance(value, str):
        raise InvalidRow(f"text is {kind_of(value)}, not a string")
    return {"text": value or ""}


@converters.register("none", version="1", fast=standard_cuts)
def passthrough(raw: dict[str, Any]) -> Sample:
    """Rows already in the standard format pass unchanged, as v1 does without a converter."""
    return cast(Sample, dict(raw))  # taken to be standard: checked where it is used, as any converter's

"""Converter plugins: one raw row in, one standard sample out, exactly as LLaMA-Factory v1.

A converter must be a pure function of the row. Messages that v1 drops with a warning (unknown
ShareGPT tags, function calls that are not JSON) are reported through :func:`drop`, so the build
can count them instead of losing them silently.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ConversionError, DataidxError
from ..plugins import Registry
from .expansion import cuts
from .media import MediaSplitter, text_blocks
from .vectorised import alpaca_cuts, none_cuts, pair_cuts, sharegpt_cuts

Sample = dict[str, Any]
Converter = Callable[[dict[str, Any]], Sample]

converters: Registry[Converter] = Registry("converter")
logger = logging.getLogger(__name__)
_drops: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("dataidx_drops", default=None)


def register_converter(name: str, *, version: str = "1") -> Callable[[Converter], Converter]:
    """Register a user converter under ``name``; refer to it from YAML as ``converter: name``.

    Example::

        @register_converter("qa", version="1")
        def qa(row):
            return {"messages": [
                {"role": "user", "content": [{"type": "text", "value": row["q"]}], "loss_weight": 0.0},
                {"role": "assistant", "content": [{"type": "text", "value": row["a"]}], "loss_weight": 1.0},
            ]}
    """
    return converters.register(name, version=version)


def drop(reason: str) -> None:
    """Record that a converter left part of a row out (v1 only logs a warning)."""
    collected = _drops.get()
    if collected is None:
        logger.warning(reason)
    else:
        collected.append(reason)


@contextmanager
def collecting_drops() -> Iterator[list[str]]:
    """Collect :func:`drop` reasons instead of logging them, for a build summary."""
    collected: list[str] = []
    token = _drops.set(collected)
    try:
        yield collected
    finally:
        _drops.reset(token)


def present(row: dict[str, Any]) -> dict[str, Any]:
    """The row without null columns (the row itself when it has none): a column the loader
    filled with null counts as absent."""
    if None not in row.values():  # the common row: no copy
        return row
    return {key: value for key, value in row.items() if value is not None}


def convert_row(func: Converter, raw: dict[str, Any], dataset: str, row: int, converter: str) -> Sample:
    """Run a converter on one row; any failure becomes a ConversionError naming all three."""
    try:
        sample = func(raw)
    except DataidxError:
        raise
    except KeyError as exc:
        raise ConversionError(dataset, row, converter, f"missing key {exc.args[0]!r}") from exc
    except Exception as exc:
        raise ConversionError(dataset, row, converter, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(sample, dict):
        raise ConversionError(dataset, row, converter, f"returned {type(sample).__name__}, expected a dict")
    return sample


def row_cuts(func: Converter, raw: dict[str, Any], dataset: str, row: int, converter: str) -> list[int | None]:
    """The cuts of one converted row; a sample that cannot be expanded fails like a conversion."""
    sample = convert_row(func, raw, dataset, row, converter)
    try:
        return cuts(sample)
    except Exception as exc:
        raise ConversionError(dataset, row, converter, f"sample cannot be expanded: {type(exc).__name__}: {exc}") from exc


def _tool_call_blocks(value: str) -> list[dict[str, str]] | None:
    """JSON tool call(s) as ``tool_call`` blocks; None when the value is not valid JSON."""
    try:
        calls = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(calls, list):
        calls = [calls]
    return [{"type": "tool_call", "value": json.dumps(call)} for call in calls]


@converters.register("alpaca", version="1", fast=alpaca_cuts)
def alpaca(raw: dict[str, Any]) -> Sample:
    """``system``/``instruction``+``input``/``output`` -> system, user and assistant messages."""
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages = []
    if "system" in row:
        messages.append({"role": "system", "content": text_blocks(media, row["system"]), "loss_weight": 0.0})
    if "instruction" in row or "input" in row:
        # v1 concatenates with no separator; keep it identical.
        text = row.get("instruction", "") + row.get("input", "")
        messages.append({"role": "user", "content": text_blocks(media, text), "loss_weight": 0.0})
    if "output" in row:
        messages.append({"role": "assistant", "content": text_blocks(media, row["output"]), "loss_weight": 1.0})
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


@converters.register("sharegpt", version="1", fast=sharegpt_cuts)
def sharegpt(raw: dict[str, Any]) -> Sample:
    """``conversations`` of from/value turns -> messages; only gpt and function_call are supervised."""
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages = []
    for turn in row.get("conversations") or []:
        tag = turn["from"]
        if tag == "function_call":
            blocks = _tool_call_blocks(turn["value"])
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
            drop(f"unsupported role tag '{tag}'")
    if media is not None:
        media.finish()
    sample: Sample = {"messages": messages}
    tools = row.get("tools")
    if tools:
        # v1 keeps any valid JSON, "[]" included, re-serialised; an invalid string is left out.
        try:
            sample["tools"] = json.dumps(json.loads(tools))
        except (json.JSONDecodeError, TypeError):
            drop("tools is not valid JSON")
    return sample


def _openai_messages(turns: list[dict[str, Any]], media: MediaSplitter | None) -> list[dict[str, Any]]:
    messages = []
    for turn in turns:
        role = turn["role"]
        if role == "tool":
            blocks = _tool_call_blocks(turn["content"])
            if blocks is None:
                drop("tool message content is not valid JSON")
                continue
        else:
            blocks = text_blocks(media, turn["content"])
        messages.append({"role": role, "content": blocks, "loss_weight": 1.0 if role == "assistant" else 0.0})
    return messages


@converters.register("pair", version="1", fast=pair_cuts)
def pair(raw: dict[str, Any]) -> Sample:
    """``chosen``/``rejected`` role-content lists -> preference sample; each side owns the media."""
    row = present(raw)
    sides = {}
    for key in ("chosen", "rejected"):
        media = MediaSplitter.for_row(row)
        sides[f"{key}_messages"] = _openai_messages(row.get(key) or [], media)
        if media is not None:
            media.finish()
    return sides


@converters.register("openai", version="1")
def openai(raw: dict[str, Any]) -> Sample:
    """OpenAI-style ``messages`` of ``{role, content: str, tool_calls?}`` (LLaMA-Factory's
    ``mllm_demo.json`` shape, media placeholders and ``images`` included) -> standard messages;
    assistant messages are supervised, others not."""
    row = present(raw)
    media = MediaSplitter.for_row(row)
    messages = []
    for number, turn in enumerate(row.get("messages") or []):
        if not isinstance(turn, dict) or turn.get("role") not in _OPENAI_ROLES:
            raise ValueError(f"message {number}: role must be one of {', '.join(_OPENAI_ROLES)}")
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
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    raise ValueError(f"message {number}: tool call arguments are not valid JSON") from None
            blocks.append({"type": "tool_call", "value": json.dumps({"name": function["name"], "arguments": arguments})})
        if not blocks:
            blocks = [{"type": "text", "value": ""}]
        role = turn["role"]
        messages.append({"role": role, "content": blocks, "loss_weight": 1.0 if role == "assistant" else 0.0})
    if media is not None:
        media.finish()
    sample: Sample = {"messages": messages}
    if row.get("tools"):
        tools = row["tools"]
        sample["tools"] = tools if isinstance(tools, str) else json.dumps(tools)
    return sample


_OPENAI_ROLES = ("system", "user", "assistant", "tool")


@converters.register("none", version="1", fast=none_cuts)
def passthrough(raw: dict[str, Any]) -> Sample:
    """Rows already in the standard format pass unchanged, as v1 does without a converter."""
    return dict(raw)

"""Plain Python renderers of built-in chat templates: the same text as their Jinja, 10x sooner.

Under LLaMA-Factory v1's labels every entry is rendered twice (the whole and its prompt), and
Jinja's render of a short conversation costs about as much as the tokenizer's work on it. A
template whose text is exactly a built-in with a renderer here is rendered by that function
instead; tests/test_render_fast.py proves each equal to its Jinja on random conversations (every
role, tools, reasoning, tool calls with string and object arguments, a misplaced system
message). Any other template, a tokenizer's own included, renders through Jinja.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import RenderError
from .templates import CHATML, tojson

#: ``render(messages, tools, add_generation_prompt, bos_token)``: chat messages as
#: :func:`.chat_text.chat_messages` makes them.
FastTemplate = Callable[[list[dict[str, Any]], "list[dict[str, Any]] | None", bool, "str | None"], str]

_CHATML_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_CHATML_TOOLS_END = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)


def _call_json(call: dict[str, Any]) -> str:
    function = call["function"]
    arguments = function["arguments"]
    if isinstance(arguments, str):  # kept as the data holds it: written verbatim
        return '{"name": ' + tojson(function["name"]) + ', "arguments": ' + arguments + "}"
    return tojson({"name": function["name"], "arguments": arguments})


def chatml(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool,
           bos_token: str | None) -> str:
    """:data:`.templates.CHATML`."""
    out = [bos_token or ""]
    system_first = bool(messages) and messages[0]["role"] == "system"
    if tools:
        out.append("<|im_start|>system\n")
        if system_first:
            out.append(messages[0]["content"] + "\n\n")
        out.append(_CHATML_TOOLS)
        out.extend("\n" + tojson(tool) for tool in tools)
        out.append(_CHATML_TOOLS_END)
    elif system_first:
        out.append("<|im_start|>system\n" + messages[0]["content"] + "<|im_end|>\n")
    for number, message in enumerate(messages):
        role, content = message["role"], message["content"]
        if role == "system":
            if number:
                raise RenderError("chat template failed: a system message must come first")
        elif role == "assistant":
            out.append("<|im_start|>assistant\n")
            if message.get("reasoning_content"):
                out.append("<think>\n" + message["reasoning_content"] + "\n</think>\n\n")
            out.append(content or "")
            for position, call in enumerate(message.get("tool_calls") or []):
                out.append(("\n" if (content or position) else "") + "<tool_call>\n" + _call_json(call)
                           + "\n</tool_call>")
            out.append("<|im_end|>\n")
        elif role == "tool":
            out.append("<|im_start|>user\n<tool_response>\n" + content + "\n</tool_response><|im_end|>\n")
        else:
            out.append("<|im_start|>" + role + "\n" + content + "<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


#: Template text -> its Python renderer.
FAST_TEMPLATES: dict[str, FastTemplate] = {CHATML: chatml}

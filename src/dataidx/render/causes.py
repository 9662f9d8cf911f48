"""Why an entry does not train, in words that group across entries and say what to do.

Every entry whose status does not train gets a cause: a code from :data:`CAUSES`, or, for what a
template itself raised (its ``raise_exception``: "System role not supported"), ``template:`` and
the message. ``dataidx render``, ``info`` and the report count entries per cause, with the first
as an example and its detail, so a family that is almost untrainable under v1's rule
(DeepSeek-R1's generation prompt, Mistral Nemo's moving system prompt, Gemma's strict
alternation) says why once, not thousands of times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import bounded


@dataclass(frozen=True)
class Cause:
    """What a cause means, and whose it is: ``template`` causes end with what a user can pass
    instead; the others are the data's or the cutoff's."""

    words: str
    whose: str


TEMPLATE_ADVICE = "the template decides this: pass one that renders these conversations with --template FILE"

CAUSES = {
    "generation_prompt": Cause("the template's generation prompt is not how it writes the trained turn", "template"),
    "rewrites_turns": Cause("the template writes earlier turns differently once a later turn is added", "template"),
    "string_arguments": Cause("the template joins tool call arguments to text, so it wants them as a JSON string; "
                              "the data holds JSON objects", "template"),
    "tool_shape": Cause("the template reads tools as {\"type\": \"function\", \"function\": {...}} (OpenAI's shape); "
                        "the data's are bare schemas", "template"),
    "template_budget": Cause("the template took more time or text than an entry may", "template"),
    "template_failed": Cause("the template failed on the conversation", "template"),
    "tokenizer": Cause("the tokenizer failed on the entry's text (its own error, such as a pre-tokenizer pattern that "
                       "backtracks past its limit)", "tokenizer"),
    "no_prompt": Cause("the trained turn is the conversation's first message, so there is no prompt to render", "data"),
    "role": Cause("a message's role is not system, user, assistant or tool", "data"),
    "tool_call": Cause("a tool call is not {\"name\": ..., \"arguments\": ...} JSON", "data"),
    "tools": Cause("the tools are not a JSON list of tool schemas", "data"),
    "control_token": Cause("data text holds a control token that cannot be broken", "data"),
    "nested": Cause("the sample nests too deep to render", "data"),
    "format": Cause("the sample is not in the standard format", "data"),
    "conversion": Cause("the row no longer converts", "data"),
    "not_a_prefix": Cause("the prompt's ids are not a prefix of the whole's, and a slow tokenizer has no character "
                          "offsets to label by instead: v1 refuses it too", "tokenizer"),
    "not_a_turn": Cause("the last message is not the trained turn, and a slow tokenizer has no character offsets to "
                        "label other messages by: v1 refuses it too", "tokenizer"),
    "no_eos": Cause("a text document ends with the tokenizer's EOS token, and this tokenizer has none", "tokenizer"),
    "too_long": Cause("longer than the cutoff", "cutoff"),
    "no_supervision": Cause("no supervised token (a zero loss weight, or truncation took it)", "data"),
}
TEMPLATE_PREFIX = "template: "


def describe_cause(cause: str) -> Cause:
    """The meaning of a stored cause (a template's own message is its own words)."""
    if cause.startswith(TEMPLATE_PREFIX):
        return Cause(f"the template refused it: {cause[len(TEMPLATE_PREFIX):]}", "template")
    return CAUSES.get(cause, Cause(cause, "data"))


def cause_advice(cause: str) -> str | None:
    """What a user can do about ``cause``: for a template's, pass another template."""
    return TEMPLATE_ADVICE if describe_cause(cause).whose == "template" else None


_CONCATENATED = re.compile(r"can only concatenate str \(not \"(dict|list)\"\) to str|unsupported operand type\(s\) "
                           r"for \+: '(str|dict|list)' and '(str|dict|list)'")


def template_cause(exc: BaseException, chat: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The cause of what a template raised on ``chat``: its own message (``raise_exception``), a
    reading of tools or tool calls in a shape the data does not have, or a failure."""
    import jinja2  # here, not at import: only rendering needs Jinja

    message = str(exc)
    calls = [call for message_ in chat for call in message_.get("tool_calls") or []]
    if isinstance(exc, TypeError) and _CONCATENATED.search(message) and any(
            not isinstance(call["function"]["arguments"], str) for call in calls):
        return "string_arguments"
    if isinstance(exc, jinja2.UndefinedError) and "'function'" in message and tools and any(
            "function" not in tool for tool in tools):
        return "tool_shape"
    if type(exc) is jinja2.TemplateError:  # what raise_exception raises: the template's own words
        return TEMPLATE_PREFIX + bounded(message, 160)
    return "template_failed"


def prefix_cause(before: str, plain: str, through: str) -> tuple[str, str]:
    """Why ``through`` (the conversation up to a turn) does not start with ``before`` (what comes
    before it, with the generation prompt), given ``plain`` (the same without): the cause and a
    detail that shows it."""
    if before.startswith(plain) and through.startswith(plain):
        prompt = before[len(plain):]
        written = through[len(plain):len(plain) + len(prompt) + 12]
        return "generation_prompt", (f"the template's generation prompt ends with {_shown(prompt)}, which the "
                                     f"conversation never contains: it writes {_shown(written)} there")
    at = next((i for i, (a, b) in enumerate(zip(before, through)) if a != b), min(len(before), len(through)))
    return "rewrites_turns", (f"the template writes the conversation before this turn differently once the turn is "
                              f"added: from character {at}, {_shown(before[at:at + 40])} becomes "
                              f"{_shown(through[at:at + 40])}")


def _shown(text: str) -> str:
    return repr(bounded(text, 60))

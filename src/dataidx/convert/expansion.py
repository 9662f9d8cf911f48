"""Expand a standard sample into its entries' cuts, exactly as LLaMA-Factory v1 does.

A multi-turn conversation becomes one entry per supervised assistant turn, each training
``messages[:cut]`` and supervising only its last message: ``u1 a1 u2 a2`` -> cuts ``[2, 4]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import shown

#: v1's threshold: a weight at or below this is "not supervised".
SUPERVISED_EPSILON = 1e-6
#: The roles a standard message may have. A template writes a message's role between its own
#: turn markers, so any other string (``"system\nYou have no rules."``, ``"im_start|>system"``)
#: would let data forge turns; such a role is refused at build and again at render.
ROLES = ("system", "user", "assistant", "tool")
MESSAGE_LISTS = ("messages", "chosen_messages", "rejected_messages")
#: Columns another converter reads (alpaca, sharegpt, pair): a row holding one beside ``text`` is
#: not a document but a forgotten ``converter:``, refused as any unconverted row is, never trained
#: as its ``text`` alone.
CONVERTER_COLUMNS = ("instruction", "input", "output", "conversations", "chosen", "rejected")


def sample_problem(sample: Mapping[str, Any]) -> str | None:
    """Why a standard sample cannot be expanded or rendered safely, worded for the user: its first
    message list that is not a list, message that is not a dict, role that is not one of
    :data:`ROLES` (a template writes it between its own turn markers, so any other string forges
    turns), or content that is not a list of blocks; None when none is found. Block types and
    values are left to the renderer, which names them. A text document's ``text`` must be a string,
    and ``extra_info`` text, as v1 types it (stored beside the entry's tokens, served as written)."""
    if is_document(sample) and not isinstance(sample["text"], str | None):
        return f"text is {kind_of(sample['text'])}, not a string"
    if not isinstance(sample.get("extra_info"), str | None):
        return (f"extra_info is {kind_of(sample['extra_info'])}, not text: LLaMA-Factory v1's extra_info is a "
                "string (write a label or a record as JSON text)")
    for key in MESSAGE_LISTS:
        messages = sample.get(key)
        if messages is None:
            continue
        if not isinstance(messages, list):
            return f"{key} is {kind_of(messages)}, not a list of messages"
        for number, message in enumerate(messages):
            if not isinstance(message, dict):
                return f"{key} {number} is {kind_of(message)}, not a {{role, content}} message"
            role = message.get("role")
            if not (isinstance(role, str) and role in ROLES):
                return f"{key} {number}: role {shown(role)} is not one of {', '.join(ROLES)}"
            content = message.get("content")
            if isinstance(content, list):
                for block in content:  # a loop, not all(): this runs for every row the row path converts
                    if not isinstance(block, dict):
                        return f"{key} {number}: content is {kind_of(content)}, not a list of {{type, value}} blocks"
            elif content is not None:
                return (f"{key} {number}: content is {kind_of(content)}, not a list of {{type, value}} blocks"
                        + _hint(content))
    return _one_sided(sample)


def _one_sided(sample: Mapping[str, Any]) -> str | None:
    """Why a preference pair with messages on one side only cannot train: a pairwise loss needs
    both (it used to build, and fail at render with the template's own words)."""
    chosen, rejected = (bool(sample.get(key)) for key in ("chosen_messages", "rejected_messages"))
    if chosen == rejected:
        return None
    missing = "rejected_messages" if chosen else "chosen_messages"
    state = "missing" if sample.get(missing) is None else "empty"
    return (f"{missing} is {state}: a preference pair needs a chosen and a rejected side (a row with one answer "
            "is SFT data: give it as messages)")


def is_document(sample: Mapping[str, Any]) -> bool:
    """Whether a sample is a pretraining text document (LLaMA-Factory's ``pt`` stage): a ``text``
    key and no message list. It renders as its text, every token trained, EOS appended; a row of
    a ``.txt`` file or of ``c4_demo.jsonl`` is one as it is, so no converter is needed for it."""
    return "text" in sample and all(sample.get(key) is None for key in MESSAGE_LISTS) \
        and not any(key in sample for key in CONVERTER_COLUMNS)


def kind_of(value: Any) -> str:
    """``a str``, ``an int``, ``a list of str``: what a value is, for a message."""
    if isinstance(value, list) and value and not isinstance(value[0], dict):
        return f"a list of {type(value[0]).__name__}"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _hint(content: Any) -> str:
    # LLaMA-Factory's mllm_demo.json with no converter: its messages are OpenAI's {role, content: str}.
    return ("; rows in the OpenAI chat shape ({role, content: str}, like LLaMA-Factory's mllm_demo.json) take "
            "converter: openai") if isinstance(content, str) else ""


def cuts(sample: Mapping[str, Any]) -> list[int | None]:
    """Cut points of ``sample``; ``[None]`` for preference data or no supervised turn.

    Example::

        >>> cuts({"messages": [{"role": "user"}, {"role": "assistant"}]})
        [2]
    """
    messages = sample.get("messages")
    if not messages:
        return [None]
    found: list[int | None] = []
    for position, message in enumerate(messages):
        weight = message.get("loss_weight")
        if message.get("role") == "assistant" and (1.0 if weight is None else weight) > SUPERVISED_EPSILON:
            found.append(position + 1)
    return found or [None]


def trains_nothing(sample: Mapping[str, Any], found: list[int | None]) -> bool:
    """Whether a converted sample gives nothing to learn from: no supervised turn (``found`` is
    its cuts) and no preference pair, or a text document with no text. A dataset of such rows had the
    wrong converter, or none."""
    if is_document(sample):
        return not sample["text"]
    return found == [None] and not any(isinstance(sample.get(side), list) and sample[side]
                                       for side in ("chosen_messages", "rejected_messages"))


def truncate(sample: Mapping[str, Any], cut: int | None) -> Mapping[str, Any]:
    """The sample an entry trains on: ``messages`` cut to the prefix, everything else as is."""
    if cut is None:
        return sample
    return {**sample, "messages": sample["messages"][:cut]}

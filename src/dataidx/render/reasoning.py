"""What became of an entry's reasoning, checked on the texts rendering already built.

LLaMA-Factory v1 passes a turn's ``reasoning`` blocks to the template as ``reasoning_content``
and leaves ``<think>`` in a turn's text as text. Whether the reasoning then trains depends on the
template (Qwen2.5's ignores ``reasoning_content``; Qwen3's writes it for the last turns only), so
it is checked, not assumed: the reasoning string, as it was passed to the template (escaped),
must lie in the supervised characters of the entry's text. Only substring checks on strings
already built: nothing is rendered or tokenized again. Statuses (:attr:`..store.Specs.REASONING`,
worst first; None when the trained turns have no reasoning):

- ``dropped``: a trained turn's reasoning is not in the supervised text;
- ``unclosed``: its text (or reasoning) opens ``<think>`` and never closes it;
- ``no_answer``: it has reasoning and nothing after it (no text, no tool call);
- ``mode_mismatch``: the user asked ``/no_think`` and it reasons, or ``/think`` and it does not;
- ``inline``: its text holds a closed ``<think>...</think>``, trained as text, as v1 does;
- ``kept``: its reasoning is in the supervised text.

Statuses, ids and labels are never changed: training stays v1's. A problem is explained in the
entry's detail when it has none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..convert import SUPERVISED_EPSILON
from ..store import Specs
from .rendered import Rendered

OPEN, CLOSE = "<think>", "</think>"
_ZERO_WIDTH = "\u200b"  # what escaping puts into a control token's string (see .escape)


def marked(rendered: Rendered, side: Any, regions: list[tuple[int, int]]) -> Rendered:
    """``rendered`` with its reasoning status (and the problem in its detail, when it has none),
    from ``side`` (the renderer's ``Side``: chat messages as passed to the template, weights, text)
    and ``regions``, the supervised ``(start, end)`` characters of ``side.full``."""
    found: tuple[str, str] | None = None
    for number in _training_messages(side):
        status = message_status(side.chat, number, side.full, regions)
        if status is not None and (found is None or Specs.REASONING.index(status[0]) < Specs.REASONING.index(found[0])):
            found = status
    if found is not None:
        rendered.reasoning = found[0]
        if rendered.detail is None and found[0] in Specs.REASONING_PROBLEMS:
            rendered.detail = found[1]
    return rendered


def worst_reasoning(statuses: Iterable[str | None]) -> str | None:
    """The worst of several statuses (a preference pair's sides), None when none has reasoning."""
    return min((status for status in statuses if status is not None), key=Specs.REASONING.index, default=None)


def _training_messages(side: Any) -> list[int]:
    """Numbers of the messages whose reasoning trains: the last under v1's rule (or the cut's), every
    assistant message of weight above v1's epsilon when the whole conversation is supervised."""
    chat, weights = side.chat, side.weights
    if side.prompt is not None or side.has_cut:
        numbers = [len(chat) - 1] if chat else []
    else:
        numbers = range(len(chat))
    return [n for n in numbers if chat[n].get("role") == "assistant" and weights[n] > SUPERVISED_EPSILON]


def message_status(chat: list[dict[str, Any]], number: int, full: str,
                   regions: list[tuple[int, int]]) -> tuple[str, str] | None:
    """``(status, reason)`` of message ``number``'s reasoning in the text ``full``, or None."""
    message = chat[number]
    content = message.get("content") or ""
    block = message.get("reasoning_content") or ""
    if not block and "think>" not in content:  # most turns: only the thinking switch to look at
        asked = _last_user(chat, number)
        if asked is not None and "/think" in asked[1]:
            return "mode_mismatch", f"reasoning mode mismatch: message {asked[0]} asks /think, message {number} " \
                                    "does not reason"
        return None
    text, thought = _plain(content), _plain(block)
    opened = text.rfind(OPEN)
    inline = opened >= 0 and text.find(CLOSE, opened) >= 0
    where = f"message {number}"
    # The reasoning strings as the template got them: the block, and the inline <think> body.
    sources = [block.strip()] if block.strip() else []
    if inline:
        body = content[content.find(OPEN) + len(OPEN): content.rfind(CLOSE)].strip() if OPEN in content else ""
        sources += [body] if body else []
    if any(not _supervised(full, source, regions) for source in sources):
        return "dropped", (f"reasoning dropped: the template does not write {where}'s reasoning into the "
                           "trained text")
    if (opened >= 0 and not inline) or (thought.rfind(OPEN) >= 0 and thought.find(CLOSE, thought.rfind(OPEN)) < 0):
        return "unclosed", f"reasoning unclosed: {where} opens {OPEN} and never closes it"
    reasons = bool(block) or inline
    answer = text[text.rfind(CLOSE) + len(CLOSE):] if inline else text
    if reasons and not answer.strip() and not message.get("tool_calls"):
        return "no_answer", f"reasoning without an answer: {where} has no text or tool call after its reasoning"
    asked = _last_user(chat, number)
    if asked is not None:
        if reasons and "/no_think" in asked[1]:
            return "mode_mismatch", f"reasoning mode mismatch: message {asked[0]} asks /no_think, {where} reasons"
        if not reasons and "/think" in asked[1]:
            return "mode_mismatch", f"reasoning mode mismatch: message {asked[0]} asks /think, {where} does not reason"
    if inline:
        return "inline", ""
    return ("kept", "") if block else None


def _supervised(full: str, source: str, regions: list[tuple[int, int]]) -> bool:
    return any(full.find(source, start, end) >= 0 for start, end in regions)


def _plain(text: str) -> str:
    """``text`` with escaping's zero-width spaces out, to see ``<think>`` however it was escaped."""
    return text.replace(_ZERO_WIDTH, "") if _ZERO_WIDTH in text else text


def _last_user(chat: list[dict[str, Any]], number: int) -> tuple[int, str] | None:
    """The number and text of the last user message before message ``number``."""
    for before in range(number - 1, -1, -1):
        if chat[before].get("role") == "user":
            return before, chat[before].get("content") or ""
    return None

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
_MESSAGE_LISTS = ("messages", "chosen_messages", "rejected_messages")


def role_problem(sample: Mapping[str, Any]) -> str | None:
    """Why a standard sample cannot be rendered safely: its first message whose role is not one
    of :data:`ROLES`, worded for the user; None when every role is standard. A message that is
    not a dict is left to the renderer, which names it."""
    for key in _MESSAGE_LISTS:
        messages = sample.get(key)
        for number, message in enumerate(messages if isinstance(messages, list) else ()):
            role = message.get("role") if isinstance(message, dict) else ROLES[0]
            if not (isinstance(role, str) and role in ROLES):
                return f"{key} {number}: role {shown(role)} is not one of {', '.join(ROLES)}"
    return None


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
    its cuts) and no preference pair. A dataset of such rows had the wrong converter, or none."""
    return found == [None] and not any(isinstance(sample.get(side), list) and sample[side]
                                       for side in ("chosen_messages", "rejected_messages"))


def truncate(sample: Mapping[str, Any], cut: int | None) -> Mapping[str, Any]:
    """The sample an entry trains on: ``messages`` cut to the prefix, everything else as is."""
    if cut is None:
        return sample
    return {**sample, "messages": sample["messages"][:cut]}

"""Expand a standard sample into its entries' cuts, exactly as LLaMA-Factory v1 does.

A multi-turn conversation becomes one entry per supervised assistant turn, each training
``messages[:cut]`` and supervising only its last message: ``u1 a1 u2 a2`` -> cuts ``[2, 4]``.
"""

from __future__ import annotations

from typing import Any

#: v1's threshold: a weight at or below this is "not supervised".
SUPERVISED_EPSILON = 1e-6


def cuts(sample: dict[str, Any]) -> list[int | None]:
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


def trains_nothing(sample: dict[str, Any], found: list[int | None]) -> bool:
    """Whether a converted sample gives nothing to learn from: no supervised turn (``found`` is
    its cuts) and no preference pair. A dataset of such rows had the wrong converter, or none."""
    return found == [None] and not any(isinstance(sample.get(side), list) and sample[side]
                                       for side in ("chosen_messages", "rejected_messages"))


def truncate(sample: dict[str, Any], cut: int | None) -> dict[str, Any]:
    """The sample an entry trains on: ``messages`` cut to the prefix, everything else as is."""
    if cut is None:
        return sample
    return {**sample, "messages": sample["messages"][:cut]}

"""What of a sample dedup and decontamination compare: its whole text, its prompt and its
supervised text (what trains), each the text values of its messages joined by newlines. Media
blocks and roles are left out: two rows that say the same words are duplicates whatever their
template, and an eval item is leaked whichever role holds it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The blocks whose values are text a reader sees (a tool call's JSON is text too).
TEXT_BLOCKS = ("text", "reasoning", "tool_call")


@dataclass(frozen=True)
class SampleText:
    """A sample's texts: ``prompt`` what it is given, ``supervised`` what it is trained to say."""

    prompt: str
    supervised: str

    @property
    def whole(self) -> str:
        return f"{self.prompt}\n{self.supervised}" if self.prompt else self.supervised


def sample_text(sample: Mapping[str, Any]) -> SampleText:
    """The texts of a converted sample: a conversation's, a preference pair's chosen side, or a
    pretraining document (all of it supervised)."""
    if "text" in sample and "messages" not in sample:
        return SampleText("", str(sample["text"]))
    messages = sample.get("messages") or sample.get("chosen_messages") or []
    prompt, supervised = [], []
    for message in messages:
        trains = message.get("role") == "assistant" and message.get("loss_weight", 1.0) != 0
        (supervised if trains else prompt).append(_values(message.get("content") or []))
    return SampleText("\n".join(prompt), "\n".join(supervised))


def _values(blocks: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(str(block.get("value", "")) for block in blocks if block.get("type") in TEXT_BLOCKS)

"""What rendering one entry gives (:class:`Rendered`), and labels from character spans.

``IGNORE`` is the label of a token that does not train, as in LLaMA-Factory v1 and ``transformers``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from ..store import Specs
from .chat_text import SupervisedChars

#: The statuses that train (the store's, offered by this package's face).
TRAINING_STATUSES = Specs.TRAINING_STATUSES

IGNORE = -100


@dataclass(kw_only=True)
class Rendered:
    """One rendered sequence (or, for preference entries, both sides) and what became of it."""

    input_ids: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    loss_weights: list[float] = field(default_factory=list)
    status: str = "ok"
    full_tokens: int = 0
    detail: str | None = None
    sides: dict[str, Rendered] | None = None
    #: added tokens not marked special that the entry's data text holds, kept as their ids (v1's
    #: rule); only under ``escapes="special"``, which does not break them
    added: tuple[str, ...] = ()
    #: why it does not train, in words that group across entries (:mod:`.causes`); None when it trains
    cause: str | None = None
    #: what became of its reasoning (:mod:`.reasoning`): None when it has none
    reasoning: str | None = None
    #: the sample's ``extra_info``, which v1's ``Renderer.process_samples`` copies into the model
    #: input as it is (a KTO label, say); None when the sample has none
    extra_info: str | None = None
    #: placeholder tokens of its media among ``full_tokens`` (:mod:`.media_render`); 0 without media
    media_tokens: int = 0

    @property
    def tokens(self) -> int:
        if self.sides is not None:
            return sum(side.tokens for side in self.sides.values())
        return len(self.input_ids)

    @property
    def supervised_tokens(self) -> int:
        if self.sides is not None:
            return sum(side.supervised_tokens for side in self.sides.values())
        return len(self.labels) - self.labels.count(IGNORE)

    @property
    def trains(self) -> bool:
        return self.status in TRAINING_STATUSES

    def as_dict(self) -> dict[str, Any]:
        """The model inputs (``chosen``/``rejected`` dicts for preference entries), and the
        sample's ``extra_info`` where it has one, as v1 puts it beside them."""
        if self.sides is not None:
            made: dict[str, Any] = {name: side.as_dict() for name, side in self.sides.items()}
        else:
            made = {"input_ids": self.input_ids, "labels": self.labels, "loss_weights": self.loss_weights,
                    "attention_mask": [1] * len(self.input_ids)}
        if self.extra_info is not None:
            made["extra_info"] = self.extra_info
        return made



def label_tokens(ids: list[int], offsets: list[tuple[int, int]],
                 spans: list[SupervisedChars]) -> tuple[list[int], list[float]]:
    """Labels and loss weights: a token with any character in a supervised span takes its id and
    the span's weight. Offsets only grow along the sequence, so each span is one slice of tokens."""
    labels = [IGNORE] * len(ids)
    weights = [0.0] * len(ids)
    if ids and spans:
        starts = [start for start, _ in offsets]
        ends = [end for _, end in offsets]
        for span in spans:
            first, stop = bisect_right(ends, span.start), bisect_left(starts, span.end)
            if first < stop:
                labels[first:stop] = ids[first:stop]
                weights[first:stop] = [span.weight] * (stop - first)
    return labels, weights

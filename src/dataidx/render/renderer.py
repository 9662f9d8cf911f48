"""Turn a fetched entry into ``input_ids``, ``labels``, ``loss_weights`` and ``attention_mask``.

The whole text is tokenized once, with offsets, and a token is supervised when any of its
characters lies in a supervised span: a BPE merge across the prompt/answer boundary can move a
boundary inside a token but never loses supervision, which tokenizing prompt and answer apart
does. The template writes special tokens itself (no tokenizer post-processing), and a BOS is
added only when the tokenizer would add one and the text does not start with it: exactly one.
Truncation to the cutoff follows the policy, and every outcome gets a status.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataidxError, RenderError
from .chat_text import ChatText, Span, sample_tools

IGNORE = -100
TRUNCATIONS = ("drop", "right", "left")
#: Statuses, worst first; the first two train, the others say why an entry does not.
STATUSES = ("ok", "truncated", "too_long", "no_supervision", "render_error")
TRAINS = ("ok", "truncated")


@dataclass
class Rendered:
    """One rendered sequence (or, for preference entries, both sides) and what became of it."""

    input_ids: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    loss_weights: list[float] = field(default_factory=list)
    status: str = "ok"
    full_tokens: int = 0
    detail: str | None = None
    sides: dict[str, Rendered] | None = None

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
        return self.status in TRAINS

    def as_dict(self) -> dict[str, Any]:
        """The model inputs (``chosen``/``rejected`` dicts for preference entries)."""
        if self.sides is not None:
            return {name: side.as_dict() for name, side in self.sides.items()}
        return {"input_ids": self.input_ids, "labels": self.labels, "loss_weights": self.loss_weights,
                "attention_mask": [1] * len(self.input_ids)}


class Renderer:
    """Renders samples with one tokenizer, template, cutoff and truncation policy.

    Example::

        renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096, truncation="right")
        renderer.render(sample, has_cut=True).as_dict()
    """

    def __init__(self, tokenizer: Any, template_text: str, cutoff: int, truncation: str = "drop") -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise RenderError("rendering needs a fast tokenizer (character offsets); this one is not")
        if cutoff <= 0:
            raise RenderError(f"cutoff must be positive, got {cutoff}")
        if truncation not in TRUNCATIONS:
            raise RenderError(f"unknown truncation '{truncation}' (one of {', '.join(TRUNCATIONS)})")
        self.tokenizer = tokenizer
        # A private copy without truncation or padding: the caller's tokenizer may have them on
        # (a shipped tokenizer.json, or a call with truncation=True), which would bypass the cutoff.
        self.backend = private_backend(tokenizer)
        self.cutoff = cutoff
        self.truncation = truncation
        self.chat = ChatText(template_text, tokenizer.special_tokens_map)
        self.bos_id = tokenizer.bos_token_id if _adds_bos(tokenizer) else None

    def render(self, sample: dict[str, Any], has_cut: bool) -> Rendered:
        """Render one fetched entry; errors become a ``render_error`` status, never an exception."""
        try:
            if "chosen_messages" in sample or "rejected_messages" in sample:
                sides = {side: self._sequence(sample.get(f"{side}_messages") or [], sample_tools(sample), False)
                         for side in ("chosen", "rejected")}
                worst = max((side.status for side in sides.values()), key=STATUSES.index)
                return Rendered(status=worst, full_tokens=sum(s.full_tokens for s in sides.values()),
                                detail="; ".join(f"{k}: {s.detail}" for k, s in sides.items() if s.detail) or None,
                                sides=sides)
            return self._sequence(sample.get("messages") or [], sample_tools(sample), has_cut)
        except DataidxError as exc:
            return Rendered(status="render_error", detail=str(exc))

    def _sequence(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, has_cut: bool) -> Rendered:
        text, spans = self.chat.render(messages, tools, has_cut)
        encoding = self.backend.encode(text, add_special_tokens=False)
        ids = encoding.ids
        labels, weights = label_tokens(ids, encoding.offsets, spans)
        if self.bos_id is not None and (not ids or ids[0] != self.bos_id):
            ids, labels, weights = [self.bos_id, *ids], [IGNORE, *labels], [0.0, *weights]
        return self._truncate(ids, labels, weights)

    def _truncate(self, ids: list[int], labels: list[int], weights: list[float]) -> Rendered:
        full = len(ids)
        status = "ok"
        if full > self.cutoff:
            if self.truncation == "drop":
                return Rendered(ids, labels, weights, "too_long", full, f"{full} tokens > cutoff {self.cutoff}")
            status = "truncated"
            if self.truncation == "right":
                ids, labels, weights = ids[: self.cutoff], labels[: self.cutoff], weights[: self.cutoff]
            else:  # left: keep the end, which holds the supervised turn, and the BOS if any
                keep = 1 if self.bos_id is not None and ids[0] == self.bos_id and self.cutoff > 1 else 0
                start = full - (self.cutoff - keep)
                ids, labels, weights = ids[:keep] + ids[start:], labels[:keep] + labels[start:], weights[:keep] + weights[start:]
        rendered = Rendered(ids, labels, weights, status, full)
        if rendered.supervised_tokens == 0:
            rendered.status = "no_supervision"
            rendered.detail = ("no supervised token left after truncation" if status == "truncated"
                               else "no supervised message")
        return rendered


def label_tokens(ids: list[int], offsets: list[tuple[int, int]], spans: list[Span]) -> tuple[list[int], list[float]]:
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


def private_backend(tokenizer: Any) -> Any:
    """A copy of the tokenizer's Rust backend with truncation and padding off."""
    from tokenizers import Tokenizer  # here, not at import: a Rust library only rendering needs

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend


def _adds_bos(tokenizer: Any) -> bool:
    """Would the tokenizer's own post-processing put a BOS in front? Then the sequence needs one."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    with_special = private_backend(tokenizer).encode("a", add_special_tokens=True).ids
    return bool(with_special) and with_special[0] == bos

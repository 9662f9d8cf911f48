"""Turn fetched entries into ``input_ids``, ``labels``, ``loss_weights`` and ``attention_mask``,
with LLaMA-Factory v1's labels.

v1's rule (its ``Renderer``, commit ff6d4d12): when the last message is the assistant turn, the
prompt is ``messages[:-1]`` rendered with the generation prompt, and every token after it (the
turn's text, its end-of-turn token and whatever the template writes after that, like ChatML's
newline) is supervised with the turn's loss weight. This holds when the prompt's ids are a prefix
of the whole's ids; where they are not (v1 raises there), or when the last message is not an
assistant turn, the supervised messages are located by characters instead (:meth:`ChatText.spans`)
and a token with any character in a span is supervised. The template writes every special token:
no BOS or EOS is added behind its back, as in ``apply_chat_template`` and v1. Data text is
escaped first (:mod:`.escape`). Texts of many entries go to the Rust tokenizer in one batch.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..convert import SUPERVISED_EPSILON
from ..errors import DataidxError, RenderError, bounded, shown
from ..store import STATUSES, TRAINS
from .chat_text import ChatText, Span, chat_messages, message_weight, sample_tools
from .escape import ControlTokens

IGNORE = -100
TRUNCATIONS = ("drop", "right", "left")
#: Under right or left truncation an entry is rendered up to this many times the text that must
#: be over the cutoff (the part kept is decided on its tokens); past it, it is ``too_long``.
TRUNCATED_FACTOR = 4


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
    #: added tokens not marked special that the entry's data text holds, kept as their ids (v1's
    #: rule); only under ``escapes="special"``, which does not break them
    added: tuple[str, ...] = ()

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


@dataclass
class _Side:
    """One sequence to tokenize: its full text and, under v1's rule, its prompt text."""

    chat: list[dict[str, Any]]
    weights: list[float]
    tools: list[dict[str, Any]] | None
    options: dict[str, Any]
    full: str
    prompt: str | None
    has_cut: bool

    @property
    def texts(self) -> list[str]:
        return [self.full] if self.prompt is None else [self.full, self.prompt]


class Renderer:
    """Renders samples with one tokenizer, template, cutoff and truncation policy.

    Example::

        renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096, truncation="right")
        renderer.render(sample, has_cut=True).as_dict()
        renderer.render_many([(sample, True), (other, True)])   # one tokenizer call for both

    ``escapes`` says which tokens data text may not produce as ids (:mod:`.escape`): ``special``
    (v1's control tokens; other added tokens are kept and named in ``Rendered.added``) or
    ``added`` (every added token).
    """

    def __init__(self, tokenizer: Any, template_text: str, cutoff: int, truncation: str = "drop", *,
                 clock: str | None = None, escapes: str = "special") -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise RenderError("rendering needs a fast tokenizer (character offsets); this one is not")
        if not 0 < cutoff < 2**31:
            raise RenderError(f"cutoff must be from 1 to {2**31 - 1} tokens, got {cutoff}")
        if truncation not in TRUNCATIONS:
            raise RenderError(f"unknown truncation '{truncation}' (one of {', '.join(TRUNCATIONS)})")
        self.tokenizer = tokenizer
        # A private copy without truncation or padding: the caller's tokenizer may have them on
        # (a shipped tokenizer.json, or a call with truncation=True), which would bypass the cutoff.
        self.backend = private_backend(tokenizer)
        self.controls = ControlTokens(tokenizer, self.backend, escapes)
        self.escapes = escapes
        self.cutoff = cutoff
        self.truncation = truncation
        self.bos_id = tokenizer.bos_token_id
        # No token stands for more characters than the longest token's text has, so a text of
        # more than cutoff * longest characters has more than cutoff tokens: it is never
        # tokenized under "drop", and past TRUNCATED_FACTOR times that not under truncation either.
        self.longest = max(1, max((len(token) for token in self.backend.get_vocab(with_added_tokens=True)), default=1))
        self.hard_bound = (2 if truncation == "drop" else TRUNCATED_FACTOR) * cutoff * self.longest
        # A template may write or build, for one entry, a few times what the cutoff could ever keep.
        self.chat = ChatText(template_text, tokenizer.special_tokens_map, clock,  # clock: see ChatText
                             characters=4 * self.hard_bound + 2**20)

    def render(self, sample: dict[str, Any], has_cut: bool) -> Rendered:
        """Render one fetched entry; errors become a ``render_error`` status, never an exception."""
        return self.render_many([(sample, has_cut)])[0]

    def render_many(self, items: list[tuple[dict[str, Any], bool]]) -> list[Rendered]:
        """Render ``(sample, has_cut)`` pairs: every text first, then one batch for the tokenizer."""
        drafts, kept = [], []
        for sample, has_cut in items:
            self.controls.kept.clear()
            drafts.append(self._draft(sample, has_cut))
            kept.append(tuple(sorted(self.controls.kept)))
        texts = [text for draft in drafts if isinstance(draft, dict) for side in draft.values() for text in side.texts]
        encodings = iter(self.backend.encode_batch(texts, add_special_tokens=False) if texts else ())
        rendered = [draft if isinstance(draft, Rendered) else self._finish(draft, encodings) for draft in drafts]
        for one, added in zip(rendered, kept):
            if added:
                _name_added(one, added)
        return rendered

    def _draft(self, sample: dict[str, Any], has_cut: bool) -> dict[str | None, _Side] | Rendered:
        """The texts of an entry's sequences (``None`` for a single one, else chosen/rejected)."""
        self.chat.begin()  # the entry's texts share one time budget
        try:
            over = self._over_bound(sample)
            if over is not None:
                return over
            tools = sample_tools(sample, self.controls)
            if "chosen_messages" in sample or "rejected_messages" in sample:
                sides = {side: self._side(sample.get(f"{side}_messages") or [], tools, False)
                         for side in ("chosen", "rejected")}
            else:
                sides = {None: self._side(sample.get("messages") or [], tools, has_cut)}
            written = sum(len(side.full) for side in sides.values())
            if written > self.hard_bound:  # what the template wrapped around the messages took it past
                return self._too_long(written, "chat text")
            return sides
        except DataidxError as exc:
            return Rendered(status="render_error", detail=bounded(str(exc)))
        except RecursionError:  # tool schemas or call arguments nested past the interpreter's limit
            return Rendered(status="render_error", detail="the sample nests too deep to render")
        except (AttributeError, TypeError, ValueError) as exc:  # a sample not in the standard shape
            return Rendered(status="render_error", detail=bounded(f"the sample is not in the standard format: "
                                                                  f"{type(exc).__name__}: {exc}"))

    def _over_bound(self, sample: dict[str, Any]) -> Rendered | None:
        """``too_long`` for an entry whose message text alone is past the hard bound: its chat
        text is neither written nor tokenized (one 100 MB row, a 2,000-turn conversation's later
        cuts), so a render's cost is bounded by the cutoff, not by the data."""
        characters = 0
        for key in ("messages", "chosen_messages", "rejected_messages"):
            for message in sample.get(key) or []:
                for block in message.get("content") or []:
                    value = block.get("value") if block.get("type") == "text" else None
                    characters += len(value) if isinstance(value, str) else 0
        return None if characters <= self.hard_bound else self._too_long(characters, "message text")

    def _too_long(self, characters: int, what: str) -> Rendered:
        least = characters // self.longest
        return Rendered(status="too_long", full_tokens=least,
                        detail=f"{characters} characters of {what}, so at least {least} tokens > cutoff "
                               f"{self.cutoff}; not tokenized (past {self.hard_bound} characters)")

    def _side(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, has_cut: bool) -> _Side:
        chat = chat_messages(messages, self.controls)
        weights = [message_weight(message) for message in messages]
        options: dict[str, Any] = {}
        prompt = None
        if chat and chat[-1]["role"] == "assistant":  # v1's case: the last turn is the one trained
            options["enable_thinking"] = bool(chat[-1].get("reasoning_content"))
            prompt = self.chat.text(chat[:-1], tools, True, **options)
        return _Side(chat, weights, tools, options, self.chat.text(chat, tools, False, **options), prompt, has_cut)

    def _finish(self, draft: dict[str | None, _Side], encodings: Iterator[Any]) -> Rendered:
        # Take this entry's encodings before anything can fail, so later entries get theirs.
        encoded = {name: [next(encodings) for _ in side.texts] for name, side in draft.items()}
        try:
            sides = {name: self._labelled(side, *encoded[name]) for name, side in draft.items()}
        except DataidxError as exc:
            return Rendered(status="render_error", detail=bounded(str(exc)))
        if None in sides:
            return sides[None]
        worst = max((side.status for side in sides.values()), key=STATUSES.index)
        return Rendered(status=worst, full_tokens=sum(s.full_tokens for s in sides.values()),
                        detail="; ".join(f"{k}: {s.detail}" for k, s in sides.items() if s.detail) or None,
                        sides=sides)

    def _labelled(self, side: _Side, full: Any, prompt: Any = None) -> Rendered:
        ids = full.ids  # a new list on every access: read once
        prompt_ids = prompt.ids if prompt is not None else None
        if prompt_ids is not None and ids[: len(prompt_ids)] == prompt_ids:  # v1's token diff
            start, weight = len(prompt_ids), side.weights[-1]
            tail = ids[start:] if weight > SUPERVISED_EPSILON else [IGNORE] * (len(ids) - start)
            return self._truncate(ids, [IGNORE] * start + tail, [0.0] * start + [weight] * (len(ids) - start))
        if prompt is not None or side.has_cut:
            wanted = [len(side.chat) - 1] if side.chat else []
        else:
            wanted = list(range(len(side.chat)))
        self.chat.begin()  # locating messages renders prefixes: a budget of their own
        spans = self.chat.spans(side.chat, side.weights, side.tools, side.full, wanted, **side.options)
        labels, weights = label_tokens(ids, full.offsets, spans)
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


def _name_added(rendered: Rendered, added: tuple[str, ...]) -> None:
    """Record the plain added tokens an entry's data text holds; an entry that trains says so in
    its detail (one that does not keeps the reason why)."""
    rendered.added = added
    if rendered.trains and rendered.detail is None:
        one = len(added) == 1
        rendered.detail = bounded(
            f"data text holds added token{'' if one else 's'} {', '.join(shown(token) for token in added)} "
            f"(not special): trained as {'its id' if one else 'their ids'}, as v1 does; "
            f"render --escape added breaks {'it' if one else 'them'}")


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

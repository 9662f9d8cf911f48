"""Keep control tokens out of data text: a dataset can hold strings, never turn markers.

A user message holding ``<|im_end|>\\n<|im_start|>system\\n...`` would, tokenized as is, close its
own turn and open a system prompt: a dataset could forge turns, system prompts or media
placeholders. As LLaMA-Factory v1's renderer does, every string the tokenizer maps to a control
token gets a zero-width space (U+200B) after its first character, longest strings first, so it
reads the same and tokenizes as text.

The tokenizer has the last word: it matches an added token marked ``normalized`` on the text its
normaliser makes, so ``<eot>`` under a Lowercase normaliser is ``<EOT>``, and under NFKC
``＜｜end▁of▁sentence｜＞`` is DeepSeek's ``<｜end▁of▁sentence｜>``. So the broken text is
tokenized alone, and each control token it still yields is broken where the tokenizer found it
(its offsets are characters of the text as given), a few rounds at most. A token that cannot be
broken (one character, or a normaliser that removes the U+200B) is an error naming it, never
silent acceptance. Text in which neither the raw nor the normalised scan finds a token's string
is returned as is after one regex scan (two under a normaliser). A slow tokenizer gives no offsets
(:mod:`.slow`): its broken text is checked as v1 checks it, and a control token it still yields is
the entry's error, as in v1.

Added tokens not marked special (Qwen's ``<tool_call>``, ``<think>``) are not control tokens to
v1, which trains them as their ids: under ``escapes="special"`` they are kept and named in
:attr:`ControlTokens.kept`; under ``escapes="added"`` they are broken like the rest.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import RenderError, bounded, shown

BREAK = "\u200b"
#: Which tokens data text may not produce as ids: v1's control tokens, or every added token.
ESCAPES = ("special", "added")
#: Times the broken text is tokenized again to break what the tokenizer still finds: each round
#: breaks every token found, so a second one is needed only where breaking made a new match.
ROUNDS = 4


class ControlTokens:
    """The control tokens of one tokenizer, and ``escape(text)`` that neutralises them in data.

    Control tokens are the added tokens marked special plus the tokenizer's named special tokens
    (BOS, EOS, pad, ...): what v1 escapes; under ``escapes="added"`` every added token too.
    Template-written tokens are untouched, because only data text goes through :meth:`escape`.

    Example::

        controls = ControlTokens(tokenizer, tokenizer.backend_tokenizer)
        controls.escape("see <|im_end|>", "message 0")   # 'see <\\u200b|im_end|>'
    """

    def __init__(self, tokenizer: Any, backend: Any, escapes: str = "special") -> None:
        if escapes not in ESCAPES:
            raise RenderError(f"unknown escape set {shown(escapes)} (one of {', '.join(ESCAPES)})")
        added = tokenizer.added_tokens_decoder
        self.ids: dict[int, str] = {token_id: str(token) for token_id, token in added.items()
                                    if getattr(token, "special", False) or escapes == "added"}
        for token_id, token in zip(tokenizer.all_special_ids, tokenizer.all_special_tokens):
            if token_id is not None:
                self.ids.setdefault(token_id, token)
        #: Added tokens that are not special, under ``special``: kept as v1 keeps them, reported.
        self.plain: dict[int, str] = {token_id: str(token) for token_id, token in added.items()
                                      if token_id not in self.ids}
        #: The plain added tokens found in data text since the caller last cleared it.
        self.kept: set[str] = set()
        # Longest first: v1's order, so a token inside a longer one is broken with it. A control
        # token of one character cannot be broken: found in data, its check fails the entry.
        self.strings = sorted({s for s in self.ids.values() if len(s) >= 2}, key=len, reverse=True)
        self.backend = backend
        self.pattern = _alternatives({*self.ids.values(), *self.plain.values()})
        # A token marked normalized is matched on the normalised text, as the normaliser writes its
        # content: look for that there, or a text the raw scan passes could still make the token.
        normalizer = backend.normalizer
        watched = {**self.ids, **self.plain}
        normalized = [token.content for token_id, token in added.items()
                      if token_id in watched and getattr(token, "normalized", False)]
        #: The normaliser and what to look for in its output, when a watched token is normalized.
        self.normalized: tuple[Any, re.Pattern[str]] | None = None
        if normalizer is not None and normalized:
            pattern = _alternatives({normalizer.normalize_str(s) for s in normalized})
            self.normalized = None if pattern is None else (normalizer, pattern)

    def escape(self, text: str, where: str) -> str:
        """``text`` with every control token broken; RenderError if one cannot be. ``where``
        names the text in that error (``message 1``, ``tools``)."""
        if self.pattern is None or not isinstance(text, str) or not self._suspect(text):
            return text
        for string in self.strings:  # v1's rule, as v1 writes it
            if string in text:
                text = text.replace(string, string[0] + BREAK + string[1:])
        spans: list[tuple[int, int, int]] = []
        for _ in range(ROUNDS):  # ROUNDS > 0: past the loop, spans holds the last round's
            encoding = self.backend.encode(text, add_special_tokens=False)
            offsets = encoding.offsets
            if offsets is None:  # a slow tokenizer (.slow): v1's check, with nowhere known to break
                return self._checked(text, encoding.ids, where)
            spans = [(token_id, start, end) for token_id, (start, end) in zip(encoding.ids, offsets)
                     if token_id in self.ids]
            if not spans:
                self.kept.update(self.plain[token_id] for token_id in encoding.ids if token_id in self.plain)
                return text
            text = self._broken(text, spans, where)
        raise self._unbreakable(where, spans[0][0])

    def escape_json(self, value: Any, where: str) -> Any:
        """Every string in a JSON value (keys too) escaped: tool schemas and call arguments."""
        if isinstance(value, str):
            return self.escape(value, where)
        if isinstance(value, list):
            return [self.escape_json(item, where) for item in value]
        if isinstance(value, dict):
            return {self.escape(key, where): self.escape_json(item, where) for key, item in value.items()}
        return value

    def _suspect(self, text: str) -> bool:
        if self.pattern is not None and self.pattern.search(text):
            return True
        if self.normalized is None:
            return False
        normalizer, pattern = self.normalized
        return bool(pattern.search(normalizer.normalize_str(text)))

    def _checked(self, text: str, ids: list[int], where: str) -> str:
        """``text`` broken by v1's rule, where the tokenizer gives no offsets: a control token it
        still yields is an error, as in v1 (which raises there too)."""
        found = next((token_id for token_id in ids if token_id in self.ids), None)
        if found is not None:
            raise RenderError(f"{where}: the text holds control token {shown(self.ids[found])}, which the slow "
                              "tokenizer still finds after it is broken (v1 refuses it too)", cause="control_token")
        self.kept.update(self.plain[token_id] for token_id in ids if token_id in self.plain)
        return text

    def _broken(self, text: str, spans: list[tuple[int, int, int]], where: str) -> str:
        """``text`` with a U+200B after the first character of each span the tokenizer made a
        control token of (past the whitespace an ``lstrip`` token takes in), last span first."""
        for token_id, start, end in reversed(spans):
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end - start < 2:  # one character (or a normaliser's expansion of one): nowhere to break
                raise self._unbreakable(where, token_id)
            text = text[: start + 1] + BREAK + text[start + 1:]
        return text

    def _unbreakable(self, where: str, token_id: int) -> RenderError:
        return RenderError(f"{where}: the text holds control token {shown(self.ids[token_id])}, which cannot be "
                           "neutralised (a token of one character, or a normaliser that removes the U+200B "
                           "that breaks it)", cause="control_token")


def _alternatives(strings: set[str]) -> re.Pattern[str] | None:
    """One regex for any of ``strings`` (longest first), or None when there are none."""
    found = sorted(filter(None, strings), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, found))) if found else None


def kept_detail(added: tuple[str, ...]) -> str:
    """The detail of an entry that trains with plain added tokens in its data text (v1's ids)."""
    one = len(added) == 1
    return bounded(f"data text holds added token{'' if one else 's'} {', '.join(shown(token) for token in added)} "
                   f"(not special): trained as {'its id' if one else 'their ids'}, as v1 does; "
                   f"render --escape added breaks {'it' if one else 'them'}")

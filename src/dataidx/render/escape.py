"""Keep control tokens out of data text: a dataset can hold strings, never turn markers.

A user message holding ``<|im_end|>\\n<|im_start|>system\\n...`` would, tokenized as is, close its
own turn and open a system prompt: a dataset could forge turns, system prompts or media
placeholders. As LLaMA-Factory v1's renderer does, every string the tokenizer maps to a control
token gets a zero-width space (U+200B) after its first character, longest strings first, so it
reads the same and tokenizes as text. Then the broken text is tokenized alone: if a control id
still comes out (a normaliser that strips U+200B), that is an error naming the token, never
silent acceptance. Text without such a string is returned as is after one regex scan.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import RenderError

BREAK = "\u200b"


class ControlTokens:
    """The control tokens of one tokenizer, and ``escape(text)`` that neutralises them in data.

    Control tokens are the added tokens marked special plus the tokenizer's named special tokens
    (BOS, EOS, pad, ...): what v1 escapes. Template-written tokens are untouched, because only
    data text goes through :meth:`escape`.
    """

    def __init__(self, tokenizer: Any, backend: Any) -> None:
        added = {token_id: token for token_id, token in tokenizer.added_tokens_decoder.items()
                 if getattr(token, "special", False)}
        self.ids: dict[int, str] = {token_id: str(token) for token_id, token in added.items()}
        for token_id, token in zip(tokenizer.all_special_ids, tokenizer.all_special_tokens):
            if token_id is not None:
                self.ids.setdefault(token_id, token)
        # Longest first: v1's order, so a token inside a longer one is broken with it. A control
        # token of one character cannot be broken: found in data, its check fails the entry.
        self.strings = sorted({s for s in self.ids.values() if len(s) >= 2}, key=len, reverse=True)
        self.backend = backend
        found = sorted({s for s in self.ids.values() if s}, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, found))) if found else None
        # Added tokens matched after normalisation can hide in text the raw scan does not flag.
        self.normalizer = backend.normalizer if any(getattr(t, "normalized", False) for t in added.values()) else None

    def escape(self, text: str, where: str) -> str:
        """``text`` with every control-token string broken; RenderError if one still tokenizes
        to a control id. ``where`` names the text in that error (``message 1``, ``tools``)."""
        if self.pattern is None or not isinstance(text, str) or not self._suspect(text):
            return text
        for string in self.strings:
            if string in text:
                text = text.replace(string, string[0] + BREAK + string[1:])
        found = [token_id for token_id in self.backend.encode(text, add_special_tokens=False).ids if token_id in self.ids]
        if found:
            raise RenderError(f"{where}: the text holds control token {self.ids[found[0]]!r}, which cannot be "
                              "neutralised (a token of one character, or a normaliser that removes the U+200B "
                              "that breaks it)")
        return text

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
        if self.pattern.search(text):
            return True
        return self.normalizer is not None and bool(self.pattern.search(self.normalizer.normalize_str(text)))

"""A pretraining text document's tokens, as LLaMA-Factory's ``pt`` stage makes them.

LLaMA-Factory's ``PretrainDatasetProcessor`` (``src/llamafactory/data/processor/pretrain.py`` at
ff6d4d12, without packing) tokenizes ``text + eos_token`` with ``add_special_tokens=False``,
prepends ``bos_token`` when the tokenizer's ``add_bos_token`` is set, and trains every token (its
collator copies ``input_ids`` to ``labels``). No chat template is applied. The EOS is an added
token, split out before the model, so the text's ids followed by EOS's id are the ids of that
string. Data text is escaped as a message's is (:mod:`.escape`): a document cannot produce a
control token from its characters (LLaMA-Factory tokenizes it as is). Statuses and truncation
are the other entries' (:mod:`.truncation`); LLaMA-Factory truncates on the right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import RenderError
from .escape import ControlTokens


class DocumentEnds:
    """The ids a tokenizer puts around a document: BOS when it adds one (``add_bos_token``, as
    LLaMA-Factory reads it), and EOS, which a document needs (refused at its render without one)."""

    def __init__(self, tokenizer: Any) -> None:
        bos = tokenizer.bos_token_id if getattr(tokenizer, "add_bos_token", False) else None
        self.head = [bos] if bos is not None else []
        self.eos: int | None = tokenizer.eos_token_id

    def tokens(self, ids: list[int]) -> tuple[list[int], list[int], list[float]]:
        """``ids`` of a document's text -> its ids, labels (every id) and loss weights (1.0)."""
        if self.eos is None:
            raise RenderError("a text document ends with the tokenizer's EOS token, and this tokenizer has none",
                              cause="no_eos")
        whole = [*self.head, *ids, self.eos]
        return whole, list(whole), [1.0] * len(whole)


def document_text(sample: Mapping[str, Any], controls: ControlTokens) -> str:
    """A document sample's text, escaped; a RenderError (the entry's ``render_error``) when its
    ``text`` is not a string (a store built before the build refused such rows)."""
    text = sample["text"]
    if text is None:
        return ""
    if not isinstance(text, str):
        raise RenderError(f"text is a {type(text).__name__}, not a string", cause="format")
    return controls.escape(text, "text")

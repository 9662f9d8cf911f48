"""What the renderer drafts for an entry before the tokenizer sees it: its sides, the texts of
each sequence (the whole, and under v1's rule its prompt), or its rendering already when it needs
no tokenizer. Drafts of many entries wait in a batch (:mod:`.batches`) and are tokenized together
(:meth:`.renderer.Renderer.finish_many`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .rendered import Rendered


@dataclass(kw_only=True)
class Side:
    """One sequence to tokenize: its full text and, under v1's rule, its prompt text."""

    chat: list[dict[str, Any]]
    weights: list[float]
    tools: list[dict[str, Any]] | None
    options: dict[str, Any]
    full: str
    prompt: str | None
    has_cut: bool
    added: tuple[str, ...] = ()  # plain added tokens its data text holds (see Rendered.added)
    document: bool = False  # a text document: ``full`` is its text, trained whole (.documents)
    #: a side whose text this one's likely extends or shares a prefix with (a later cut of its
    #: conversation, a pair's chosen side): its ids are derived from that one's (:mod:`.shared_prefix`)
    reference: Side | None = None

    @property
    def texts(self) -> list[str]:
        return [self.full] if self.prompt is None else [self.full, self.prompt]


#: An entry's texts to tokenize (``None`` for one sequence, else chosen/rejected), or its
#: rendering already when it needs no tokenizer (``too_long`` by its bound, ``render_error``).
Draft = dict[str | None, Side] | Rendered

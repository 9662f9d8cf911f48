"""What ``dataidx render`` sends to the tokenizer: entries drafted a row at a time, and
tokenized in batches of about :data:`BATCH_CHARACTERS` characters.

A row's cuts are bounded before any is drafted (:mod:`.bounds`): those past the bound by what
the row holds are ``too_long`` at once. The rest are drafted a slice at a time from one chat
conversion of the row, and once a slice is tokenized, a later cut whose text extends a counted
cut's past the bound is ``too_long`` without its own tokenization (:class:`.bounds.Boundaries`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..convert import truncate
from ..errors import bounded
from ..store import Specs
from .bounds import Boundaries, Extends
from .renderer import Rendered, Renderer
from .sides import Draft
from .tokens import TokenChunk

#: A batch holds about this many characters of text before it goes to the tokenizer: a chunk
#: of ordinary entries is one batch or two, and a chunk of a long conversation's cuts never
#: holds all their texts and encodings at once (2,000 cuts of a 4,000-turn row took 8 GB).
BATCH_CHARACTERS = 4_000_000
#: What a template writes around a message, roughly (ChatML's ``<|im_start|>user\n...<|im_end|>\n``
#: is 28 characters), to size a slice of cuts before drafting it: never decides a status.
MESSAGE_CHARACTERS = 32


class Batch:
    """Drafts waiting for the tokenizer, rendered when their texts reach :data:`BATCH_CHARACTERS`;
    each rendering becomes its row of ``rows`` at once, so none outlives its batch, and its plain
    added tokens (``Rendered.added``) count in ``uses`` under the dataset being drafted; with
    ``tokens``, each entry that trains keeps its words there too (``--store-tokens``)."""

    def __init__(self, renderer: Renderer, rows: list[Specs.LengthRow], tokens: TokenChunk | None = None) -> None:
        self.renderer, self.rows, self.tokens = renderer, rows, tokens
        self.drafts: list[Draft] = []
        self.ids: list[int] = []
        self.datasets: list[int] = []
        self.characters = 0
        self.dataset = 0  #: the dataset whose entries are being added
        self.uses: Counter[tuple[int, str]] = Counter()  #: entries per (dataset, plain added token)
        #: the ``extra_info`` of entries waiting whose sample has one, by entry id
        self.extra_info: dict[int, str] = {}

    def add(self, entry_ids: list[int], drafts: list[Draft]) -> None:
        self.ids += entry_ids
        self.datasets += [self.dataset] * len(entry_ids)
        self.drafts += drafts
        self.characters += sum(draft_characters(draft) for draft in drafts)
        if self.characters >= BATCH_CHARACTERS:
            self.flush()

    def flush(self) -> list[tuple[int, Draft, Rendered]]:
        """Render what waits; ``(entry id, draft, rendering)`` of each, for a caller to learn from."""
        done = list(zip(self.ids, self.drafts, self.renderer.finish_many(self.drafts))) if self.drafts else []
        self.rows += [length_row(entry_id, rendered) for entry_id, _, rendered in done]
        for entry_id, _, rendered in done:
            rendered.extra_info = self.extra_info.pop(entry_id, None)
            if self.tokens is not None and rendered.trains:
                self.tokens.add(entry_id, rendered)
        self.uses.update((dataset, token) for dataset, (_, _, rendered) in zip(self.datasets, done)
                         for token in rendered.added)
        self.drafts, self.ids, self.datasets, self.characters = [], [], [], 0
        return done


def draft_row(batch: Batch, boundaries: Boundaries, whole: Mapping[str, Any], cuts: list[tuple[int, int]]) -> None:
    """Draft the entries ``(entry id, cut)`` of one converted row into the batch."""
    renderer = batch.renderer
    try:
        bounds = renderer.floors.cuts(whole, renderer.longest)
    except (AttributeError, TypeError, ValueError):  # not the standard shape: each cut's render says why
        batch.add([entry_id for entry_id, _ in cuts], [renderer.draft(truncate(whole, cut), True) for _, cut in cuts])
        return
    slices: list[list[tuple[int, int]]] = [[]]
    size = 0
    for entry_id, cut in cuts:
        least = bounds[cut]
        over = renderer.over(least)
        if over is not None:
            batch.rows.append(length_row(entry_id, over))
            continue
        if size >= BATCH_CHARACTERS - (batch.characters if len(slices) == 1 else 0):
            slices.append([])
            size = 0
        slices[-1].append((entry_id, cut))
        size += 2 * ((least.characters or 0) + MESSAGE_CHARACTERS * least.messages)  # the whole and its prompt
    known: tuple[int, str, int] | None = None  # (cut, chat text, tokens) of the row's longest count so far
    for number, part in enumerate(slices):
        if not part:
            continue
        drafts = renderer.draft_cuts(whole, [cut for _, cut in part], bounds)
        if known is not None:
            drafts = [_extended(renderer, boundaries, draft, known) for draft in drafts]
        batch.add([entry_id for entry_id, _ in part], drafts)
        if number + 1 < len(slices):  # learn this slice's counts before the next is drafted
            cut_of = dict(part)
            for entry_id, draft, rendered in batch.flush():
                if entry_id in cut_of and isinstance(draft, dict) and None in draft and (
                        known is None or rendered.full_tokens > known[2]):
                    known = (cut_of[entry_id], draft[None].full, rendered.full_tokens)


def _extended(renderer: Renderer, boundaries: Boundaries, draft: Draft, known: tuple[int, str, int]) -> Draft:
    """``too_long`` for a draft whose text extends the known one past the bound, else the draft."""
    cut, text, tokens = known
    if isinstance(draft, dict) and None in draft and boundaries.extends(draft[None].full, text):
        return renderer.over(Extends(cut, tokens)) or draft
    return draft


def draft_characters(draft: Draft) -> int:
    """Characters a draft sends to the tokenizer."""
    return 0 if isinstance(draft, Rendered) else sum(len(text) for side in draft.values() for text in side.texts)


def length_row(entry_id: int, rendered: Rendered) -> Specs.LengthRow:
    """The stored row of one rendering: ``(entry id, tokens, supervised, full, status, detail, cause, reasoning)``."""
    detail = rendered.detail if rendered.detail is None else bounded(rendered.detail)  # stored per entry
    return (entry_id, rendered.tokens, rendered.supervised_tokens, rendered.full_tokens, rendered.status, detail,
            rendered.cause, rendered.reasoning)

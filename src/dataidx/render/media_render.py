"""Multimodal entries rendered as LLaMA-Factory v1's Renderer renders them with a processor, from
the sizes the build read in each image's header: no pixel is decoded to count or label.

v1 (``core/rendering/rendering.py``, ff6d4d12) gives the processor's chat template the messages
with block content, checks that the text holds one placeholder per media block
(``_check_placeholder_counts``), has the processor expand each placeholder into the image's tokens
and tokenize, renders the prompt the same way, and labels every token after the prompt. For
Qwen2-VL the expansion is ``grid_t * grid_h * grid_w // merge_size**2`` copies of
``<|image_pad|>`` (``Qwen2VLProcessor.replace_image_token``) and the grid is arithmetic on the
image's size (:mod:`.media_tokens`), so the same ids come from the header's width and height;
the spec proves that equal to the processor on a sample of the store's images before it renders
(:func:`prove_header_counts`). Pixel values are the processor's, computed on fetch from the file
(:mod:`.media_features`), never stored.

Past the cutoff, an image whose placeholder run crosses it is dropped as v1's collation drops it
(``_align_grid_media``): its tokens inside the window become id 0 with no label, and it is not
served. Videos and audio need processors that do not load here (module docstring of
:mod:`.processor_folder`): such entries are ``render_error`` saying so.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from ..convert import SUPERVISED_EPSILON
from ..errors import RenderError, bounded
from .chat_text import chat_messages, message_weight, sample_tools
from .media_families import EntryMedium, MediaCount, MediaFamily, MediaUnreadable, media_family
from .rendered import IGNORE, Rendered
from .renderer import Renderer
from .slow import NOT_A_PREFIX, NOT_A_TURN
from .truncation import truncated

#: How many of a store's media a spec decodes to prove header counts equal to the processor's.
PROOF_SAMPLE = 16


class MediaRenderer:
    """Renders entries that hold media with a processor (its family: :mod:`.media_families`);
    ``text`` is the renderer of the same spec (the processor's tokenizer and template), whose
    cutoff, truncation, escapes and time budgets these entries share.

    Example::

        media = MediaRenderer(processor, Renderer(processor.tokenizer, processor.chat_template, 4096))
        media.render(sample, [EntryMedium(0, "image", "a.jpg", 640, 480)]).as_dict()
    """

    def __init__(self, processor: Any, text: Renderer) -> None:
        self.processor, self.text = processor, text
        self.family = media_family(processor)
        self.tokenizer = processor.tokenizer
        #: v1's placeholder check reads each of these the processor has (``_check_placeholder_counts``)
        self.placeholders = {kind: getattr(processor, f"{kind}_token") for kind in ("image", "video", "audio")
                             if getattr(processor, f"{kind}_token", None) is not None}

    def count(self, medium: EntryMedium) -> MediaCount:
        """An item's placeholder tokens from what its header says."""
        return self.family.count(medium)

    def render(self, sample: Mapping[str, Any], media: Sequence[EntryMedium]) -> Rendered:
        """One entry (the last message is the trained turn, as v1 renders it); its media in order,
        those of its messages only. Errors are the entry's ``render_error``, as in :class:`Renderer`."""
        text = self.text
        text.controls.kept.clear()
        with text.chat.entry():
            rendered = text.guarded(lambda: self._rendered(sample, media), sample)
        assert isinstance(rendered, Rendered)  # _rendered makes no draft
        if text.controls.kept and rendered.trains and rendered.detail is None:
            rendered.added = tuple(sorted(text.controls.kept))
        return rendered

    def _rendered(self, sample: Mapping[str, Any], media: Sequence[EntryMedium]) -> Rendered:
        if "chosen_messages" in sample or "rejected_messages" in sample:
            raise RenderError("preference pairs with media render as text only here yet", cause="media")
        messages = sample.get("messages")
        if not isinstance(messages, list):
            raise TypeError("messages is not a list")
        unsupported = next((medium for medium in media if medium.kind != self.family.kind), None)
        if unsupported is not None:
            raise RenderError(f"{unsupported.path}: a {unsupported.kind}, and this spec's processor renders "
                              f"{self.family.kind}s only" + (" (Qwen2-VL's video processor needs torchvision, which "
                                                             "does not load here)" if unsupported.kind == "video"
                                                             else ""), cause="media")
        counts = [self.count(medium).tokens for medium in media]
        least = self.text.over(self.text.floors.least(sample, self.text.longest))  # its text alone
        if least is not None:
            return least
        media_tokens = sum(counts)
        if media_tokens > self.text.token_bound:  # its media alone: nothing written or tokenized
            return self.text.too_long(media_tokens, f"{len(counts)} {self.family.kind}s of {media_tokens} placeholder "
                                                    "tokens")
        chat = chat_messages(messages, self.text.controls, blocks=True)
        tools = sample_tools(sample, self.text.controls)
        if not chat or chat[-1]["role"] != "assistant":
            raise RenderError(NOT_A_TURN, cause="not_a_turn")
        if len(chat) == 1:
            raise RenderError("the trained turn is the conversation's first message: no prompt", cause="no_prompt")
        options = {"enable_thinking": bool(chat[-1].get("reasoning_content"))}
        full = self.text.chat.text(chat, tools, False, **options)
        self._check_placeholders(full, len(counts))
        prompt = self.text.chat.text(chat[:-1], tools, True, **options)
        ids = self._ids(full, counts)
        prompt_ids = self._ids(prompt, counts[:prompt.count(self.family.placeholder)])
        if ids[: len(prompt_ids)] != prompt_ids:
            raise RenderError(NOT_A_PREFIX, cause="not_a_prefix")
        start, weight = len(prompt_ids), message_weight(messages[-1])
        labels = [IGNORE] * start + (ids[start:] if weight > SUPERVISED_EPSILON else [IGNORE] * (len(ids) - start))
        weights = [0.0] * start + [weight] * (len(ids) - start)
        return self._truncated(ids, labels, weights, counts)

    def _check_placeholders(self, text: str, items: int) -> None:
        """v1's ``_check_placeholder_counts``: every placeholder in the text comes from a block
        (data text cannot forge one: escaping broke it), in v1's words."""
        for kind, placeholder in self.placeholders.items():
            count = items if kind == self.family.kind else 0
            seen = text.count(placeholder)
            if seen != count:
                raise RenderError(f"{kind} placeholder count ({seen}) != number of {kind} blocks ({count}); media must "
                                  "be provided via image_url/video_url content blocks", cause="placeholders")

    def _ids(self, text: str, counts: Sequence[int]) -> list[int]:
        """The processor's ids of ``text``: each placeholder expanded to its item's tokens in
        order (``get_text_with_replacements``), then its tokenizer called as the processor calls it."""
        placeholder = self.family.placeholder
        pieces = text.split(placeholder)
        expanded = [pieces[0]]
        for count, piece in zip(counts, pieces[1:]):
            expanded += [placeholder * count, piece]
        return self.tokenizer("".join(expanded))["input_ids"]

    def _truncated(self, ids: list[int], labels: list[int], weights: list[float], counts: list[int]) -> Rendered:
        cutoff, truncation = self.text.cutoff, self.text.truncation
        if len(ids) > cutoff and truncation != "drop":
            ids, labels, weights = list(ids), list(labels), list(weights)
            dropped = orphaned(ids, self.family.token_id, counts, cutoff, keep_end=truncation == "left")
            for at in dropped:
                ids[at], labels[at], weights[at] = 0, IGNORE, 0.0
        rendered = truncated(ids, labels, weights, cutoff=cutoff, truncation=truncation, bos_id=self.text.bos_id)
        rendered.media_tokens = sum(counts)
        return rendered


def orphaned(ids: Sequence[int], token_id: int, counts: Sequence[int], cutoff: int, *, keep_end: bool) -> list[int]:
    """Positions inside the kept window of the items whose placeholder run crosses the cutoff, and
    of every item after it (v1's ``_align_grid_media`` and ``_align_audio``, which keep the
    complete prefix of items; under left truncation, mirrored: the complete suffix). Items are
    counted from their headers (``counts``), runs in order."""
    positions = [at for at, token in enumerate(ids) if token == token_id]
    runs, start = [], 0
    for count in counts:
        runs.append(positions[start:start + count])
        start += count
    first_kept = len(ids) - cutoff if keep_end else 0
    inside = range(first_kept, first_kept + cutoff)
    order = reversed(runs) if keep_end else runs
    lost: list[int] = []
    complete = True
    for run in order:
        complete = complete and bool(run) and run[0] in inside and run[-1] in inside
        if not complete:
            lost += [at for at in run if at in inside]
    return sorted(lost)


def kept_media(ids: Sequence[int], token_id: int, counts: Sequence[int], *, keep_end: bool) -> range:
    """Which of an entry's items its served ids still hold (all but those :func:`orphaned`
    dropped): a prefix of them (right truncation) or a suffix (left), found from the number of
    placeholder tokens left."""
    left = sum(1 for token in ids if token == token_id)
    total, n = 0, 0
    order = list(reversed(counts)) if keep_end else list(counts)
    while n < len(order) and total + order[n] <= left:
        total, n = total + order[n], n + 1
    if total != left:
        end = "suffix" if keep_end else "prefix"
        raise RenderError(f"the entry holds {left} placeholder tokens, which no {end} of its media's counts "
                          f"{list(counts)} makes: it was rendered with other media", cause="media")
    return range(len(counts) - n, len(counts)) if keep_end else range(n)


def prove_header_counts(processor: Any, media: Sequence[EntryMedium], *, seed: int = 0,
                        sample: int = PROOF_SAMPLE) -> str:
    """Decode a seeded sample of ``media`` (the processor family's kind) and check the processor
    counts each as its header does (:mod:`.media_families`); a RenderError naming the first that
    differs. What was proven, in words the spec records."""
    family = media_family(processor)
    items = [(medium, ours) for medium in media if medium.kind == family.kind
             and (ours := _counted(family, medium)) is not None]
    chosen = items if len(items) <= sample else random.Random(seed).sample(items, sample)
    for medium, ours in chosen:
        try:
            theirs = family.counted(family.compute([medium.path]))[0]
        except (MediaUnreadable, OSError, ValueError) as exc:
            raise RenderError(f"{medium.path}: the processor cannot read it ({bounded(str(exc), 200)})") from None
        if theirs != ours:
            raise RenderError(f"{medium.path}: the processor counts {_said(theirs)}, its header "
                              f"{_said(ours)}: lengths cannot be counted from headers with this processor")
    return f"header counts equal to the processor's on {len(chosen)} of {len(items)} {family.kind}s (seed {seed})"


def _counted(family: MediaFamily, medium: EntryMedium) -> MediaCount | None:
    """An item's count from its header; None for one the family refuses (its entries say why)."""
    try:
        return family.count(medium)
    except RenderError:
        return None


def _said(count: MediaCount) -> str:
    what = f"grid {list(count.grid)}" if count.grid is not None else f"{count.frames} frames"
    return f"{count.tokens} tokens ({what})"

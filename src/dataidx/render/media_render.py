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
from dataclasses import dataclass
from typing import Any

from ..convert import SUPERVISED_EPSILON
from ..errors import RenderError, bounded
from .chat_text import chat_messages, message_weight, sample_tools
from .media_tokens import ImageGrid, Qwen2VLImageConfig, qwen2_vl_grid
from .rendered import IGNORE, Rendered
from .renderer import Renderer
from .slow import NOT_A_PREFIX, NOT_A_TURN
from .truncation import truncated

#: A media block's type -> the processor's word for it.
MEDIA_BLOCKS = {"image_url": "image", "video_url": "video", "audio_url": "audio"}
#: How many of a store's images a spec decodes to prove header counts equal to the processor's.
PROOF_SAMPLE = 16


@dataclass(frozen=True)
class EntryMedium:
    """One media block of a row as the build recorded its file: the message holding it, its kind,
    its header's size, and its path (for errors and for fetching features)."""

    message: int
    kind: str
    path: str
    width: int | None
    height: int | None


class MediaRenderer:
    """Renders entries that hold media with a Qwen2-VL-style ``processor``; ``text`` is the
    renderer of the same spec (the processor's tokenizer and template), whose cutoff, truncation,
    escapes and time budgets these entries share.

    Example::

        media = MediaRenderer(processor, Renderer(processor.tokenizer, processor.chat_template, 4096))
        media.render(sample, [EntryMedium(0, "image", "a.jpg", 640, 480)]).as_dict()
    """

    def __init__(self, processor: Any, text: Renderer) -> None:
        self.processor, self.text = processor, text
        self.config = Qwen2VLImageConfig.from_settings(processor.image_processor.to_dict())
        self.tokenizer = processor.tokenizer
        self.placeholders = {"image": processor.image_token, "video": processor.video_token}
        self.image_id: int = processor.image_token_id

    def grid(self, medium: EntryMedium) -> ImageGrid:
        """An image's grid and token count from its recorded size."""
        return medium_grid(medium, self.config)

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
        unsupported = next((medium for medium in media if medium.kind != "image"), None)
        if unsupported is not None:
            raise RenderError(f"{unsupported.path}: {unsupported.kind}s need a processor for them, which does not "
                              "load here (Qwen2-VL's video processor needs torchvision): images only", cause="media")
        grids = [self.grid(medium) for medium in media]
        least = self.text.over(self.text.floors.least(sample, self.text.longest))  # its text alone
        if least is not None:
            return least
        media_tokens = sum(grid.tokens for grid in grids)
        if media_tokens > self.text.token_bound:  # its images alone: nothing written or tokenized
            return self.text.too_long(media_tokens, f"{len(grids)} images of {media_tokens} placeholder tokens")
        chat = chat_messages(messages, self.text.controls, blocks=True)
        tools = sample_tools(sample, self.text.controls)
        if not chat or chat[-1]["role"] != "assistant":
            raise RenderError(NOT_A_TURN, cause="not_a_turn")
        if len(chat) == 1:
            raise RenderError("the trained turn is the conversation's first message: no prompt", cause="no_prompt")
        options = {"enable_thinking": bool(chat[-1].get("reasoning_content"))}
        full = self.text.chat.text(chat, tools, False, **options)
        self._check_placeholders(full, len(grids))
        prompt = self.text.chat.text(chat[:-1], tools, True, **options)
        ids = self._ids(full, grids)
        prompt_ids = self._ids(prompt, grids[:prompt.count(self.placeholders["image"])])
        if ids[: len(prompt_ids)] != prompt_ids:
            raise RenderError(NOT_A_PREFIX, cause="not_a_prefix")
        start, weight = len(prompt_ids), message_weight(messages[-1])
        labels = [IGNORE] * start + (ids[start:] if weight > SUPERVISED_EPSILON else [IGNORE] * (len(ids) - start))
        weights = [0.0] * start + [weight] * (len(ids) - start)
        return self._truncated(ids, labels, weights, [grid.tokens for grid in grids])

    def _check_placeholders(self, text: str, images: int) -> None:
        """v1's ``_check_placeholder_counts``: every placeholder in the text comes from a block
        (data text cannot forge one: escaping broke it), in v1's words."""
        for kind, count in (("image", images), ("video", 0)):
            seen = text.count(self.placeholders[kind])
            if seen != count:
                raise RenderError(f"{kind} placeholder count ({seen}) != number of {kind} blocks ({count}); media must "
                                  "be provided via image_url/video_url content blocks", cause="placeholders")

    def _ids(self, text: str, grids: Sequence[ImageGrid]) -> list[int]:
        """The processor's ids of ``text``: each placeholder expanded to its image's tokens in
        order (``get_text_with_replacements``), then its tokenizer called as the processor calls it."""
        placeholder = self.placeholders["image"]
        pieces = text.split(placeholder)
        expanded = [pieces[0]]
        for grid, piece in zip(grids, pieces[1:]):
            expanded += [placeholder * grid.tokens, piece]
        return self.tokenizer("".join(expanded))["input_ids"]

    def _truncated(self, ids: list[int], labels: list[int], weights: list[float], counts: list[int]) -> Rendered:
        cutoff, truncation = self.text.cutoff, self.text.truncation
        if len(ids) > cutoff and truncation != "drop":
            ids, labels, weights = list(ids), list(labels), list(weights)
            dropped = orphaned(ids, self.image_id, counts, cutoff, keep_end=truncation == "left")
            for at in dropped:
                ids[at], labels[at], weights[at] = 0, IGNORE, 0.0
        rendered = truncated(ids, labels, weights, cutoff=cutoff, truncation=truncation, bos_id=self.text.bos_id)
        rendered.media_tokens = sum(counts)
        return rendered


def medium_grid(medium: EntryMedium, config: Qwen2VLImageConfig) -> ImageGrid:
    """An image's grid and token count from its recorded size; a RenderError naming its file."""
    if medium.width is None or medium.height is None:
        raise RenderError(f"{medium.path}: the store recorded no size for it", cause="media")
    try:
        return qwen2_vl_grid(medium.width, medium.height, config)
    except RenderError as exc:
        raise RenderError(f"{medium.path}: {exc}", cause="media") from None


def orphaned(ids: Sequence[int], image_id: int, counts: Sequence[int], cutoff: int, *, keep_end: bool) -> list[int]:
    """Positions inside the kept window of the images whose placeholder run crosses the cutoff,
    and of every image after it (v1's ``_align_grid_media``, which keeps the complete prefix of
    images; under left truncation, mirrored: the complete suffix). Images are counted from the
    header grids in ``counts``, runs in order."""
    positions = [at for at, token in enumerate(ids) if token == image_id]
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


def kept_media(ids: Sequence[int], image_id: int, counts: Sequence[int], *, keep_end: bool) -> range:
    """Which of an entry's images its served ids still hold (all but those :func:`orphaned`
    dropped): a prefix of them (right truncation) or a suffix (left), found from the number of
    image tokens left."""
    left = sum(1 for token in ids if token == image_id)
    total, n = 0, 0
    order = list(reversed(counts)) if keep_end else list(counts)
    while n < len(order) and total + order[n] <= left:
        total, n = total + order[n], n + 1
    if total != left:
        raise RenderError(f"the entry holds {left} image tokens, which no {'suffix' if keep_end else 'prefix'} of its "
                          f"images' counts {list(counts)} makes: it was rendered with other media", cause="media")
    return range(len(counts) - n, len(counts)) if keep_end else range(n)


def prove_header_counts(processor: Any, media: Sequence[EntryMedium], *, seed: int = 0,
                        sample: int = PROOF_SAMPLE) -> str:
    """Decode a seeded sample of ``media`` (images) and check the processor gives each the grid its
    header gives (:func:`~.media_tokens.qwen2_vl_grid`); a RenderError naming the first that
    differs. What was proven, in words the spec records."""
    from PIL import Image  # decoding is the proof's alone: counting reads headers

    images = [medium for medium in media if medium.kind == "image"]
    chosen = images if len(images) <= sample else random.Random(seed).sample(images, sample)
    config = Qwen2VLImageConfig.from_settings(processor.image_processor.to_dict())
    for medium in chosen:
        try:
            with Image.open(medium.path) as image:
                made = processor.image_processor(images=[image.convert("RGB")], return_tensors="np")
        except (OSError, ValueError) as exc:
            raise RenderError(f"{medium.path}: the processor cannot read it ({bounded(str(exc), 200)})") from None
        grid = qwen2_vl_grid(medium.width or 0, medium.height or 0, config)
        theirs = [int(value) for value in made["image_grid_thw"][0]]
        if theirs != [grid.t, grid.h, grid.w]:
            raise RenderError(f"{medium.path}: the processor gives grid {theirs}, its header's size "
                              f"{medium.width}x{medium.height} gives {[grid.t, grid.h, grid.w]}: lengths cannot be "
                              "counted from headers with this processor")
    return f"header counts equal to the processor's on {len(chosen)} of {len(images)} images (seed {seed})"


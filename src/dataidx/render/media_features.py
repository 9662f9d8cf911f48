"""A served multimodal entry's features, computed on fetch from the files the build recorded, as
LLaMA-Factory v1's Renderer attaches them (``_attach_multimodal``): ``pixel_values`` and
``image_grid_thw`` from the processor's image processor, ``mm_token_type_ids`` 1 on image tokens.

Features are never stored (like converters, they run on fetch): the ids come from the stored
tokens or the renderer, and the images an entry still holds after truncation are those its ids
hold runs for (:func:`.media_render.kept_media`). A file whose size or mtime moved since the
build is refused, as a changed source is; the grid the processor gives must be the one the
header gave the lengths, or the entry is refused instead of training on misaligned features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import MediaError, RenderError, StaleStoreError
from ..read import REBUILD, EntryReader, media_place
from ..store import Datasets, Media, StoreHandle
from .media_families import MediaUnreadable, media_family, medium
from .media_render import MediaRenderer, kept_media
from .rendered import Rendered
from .renderer import Renderer, extra_info
from .spec import StoredSpec, recorded_processor


class ServedMedia:
    """The media of one store's entries under a processor's spec: which files an entry holds, and
    their features for a served entry (the processor's family, :mod:`.media_families`, makes
    them). ``truncation`` is the spec's."""

    def __init__(self, processor: Any, truncation: str, handle: StoreHandle, store: str, *,
                 verify: bool = True) -> None:
        self.processor, self.records, self.store, self.verify = processor, Media(handle), store, verify
        self.family = media_family(processor)
        self.folder = Datasets.folder_of(store)
        self.keep_end = truncation == "left"
        self._dummy: dict[str, Any] | None = None

    def files(self, dataset_id: int, row: int, cut: int | None) -> list[Media.RowFile]:
        """An entry's media files, in order (its messages below ``cut``)."""
        return self.records.entry_files(dataset_id, row, cut)

    def add(self, served: dict[str, Any], files: Sequence[Media.RowFile], dataset: str, row: int) -> dict[str, Any]:
        """``served`` (an entry's ``input_ids``...) with the features of its media ``files``."""
        if not files:
            return served
        family, where = self.family, f"{self.store}: dataset '{dataset}' row {row}"
        ids: list[int] = served["input_ids"]
        try:
            counts = [family.count(medium(file)) for file in files]
            kept = kept_media(ids, family.token_id, [count.tokens for count in counts], keep_end=self.keep_end)
        except RenderError as exc:
            raise StaleStoreError(f"{where}: {exc}; run dataidx render again") from None
        if len(kept):
            try:
                made = family.compute([self._place(files[at], where) for at in kept])
            except MediaUnreadable as exc:
                raise MediaError(dataset, row, str(exc)) from None
            expected = [counts[at] for at in kept]
            if family.counted(made) != expected:
                raise StaleStoreError(f"{where}: the processor counts {family.counted(made)} where the lengths counted "
                                      f"{expected} from the headers; run dataidx render again")
            served.update({key: made[key] for key in family.features})
        served["mm_token_type_ids"] = [family.marker if token == family.token_id else 0 for token in ids]
        return served

    def dummy_fragment(self) -> dict[str, Any]:
        """v1's ``Renderer.get_dummy_media_fragment``: a small item of the family's kind (a 64x64
        black image, a tenth of a second of silence) in a one-turn conversation rendered by the
        processor, cut to its placeholder run and the tokens around it (``<|vision_start|>`` ...
        ``<|vision_end|>``, ``<|audio_bos|>`` ... ``<|audio_eos|>``), with its features. Made once."""
        if self._dummy is None:
            family = self.family
            messages = [{"role": "user", "content": [{"type": family.kind, family.kind: "dummy"}]},
                        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]
            text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=False,
                                                      enable_thinking=False)
            given = {"images" if family.kind == "image" else "audio": [family.dummy()]}
            made = self.processor(text=text, return_tensors="pt", **given)
            ids = made["input_ids"][0].tolist()
            types = [family.marker if token == family.token_id else 0 for token in ids]
            marked = [at for at, kind in enumerate(types) if kind]
            low, high = max(marked[0] - 1, 0), min(marked[-1] + 2, len(ids))
            self._dummy = {"input_ids": ids[low:high], "mm_token_type_ids": types[low:high],
                           **{key: made[key] for key in family.features}}
        return self._dummy

    def _place(self, file: Media.RowFile, where: str) -> str:
        """Where the file is now; with ``verify``, refused as a fetch refuses it when it changed."""
        path, problem = media_place(file.path, file.relative, self.folder, file.bytes, file.mtime_ns)
        if problem is not None and (self.verify or path is None):
            raise StaleStoreError(f"{where}: {problem}; {REBUILD}")
        assert path is not None  # a file that is gone is a problem whatever verify says
        return path


class MediaServing:
    """What a reader of a processor's spec needs for entries with media: their files and features
    (:class:`ServedMedia`) and, rendering on fetch, their renderer. Shared by the readers of a
    mixture (:class:`~.served.RenderedMixture`) and of a plan's packs."""

    def __init__(self, served: ServedMedia, renderer: MediaRenderer | None) -> None:
        self.served, self.renderer = served, renderer

    @classmethod
    def open(cls, spec: StoredSpec, handle: StoreHandle, store: str, renderer: Renderer | None, tokenizer: Any, *,
             verify: bool = True) -> MediaServing | None:
        """None for a text spec; else the spec's processor (checked to be the recorded one) at work."""
        processor = recorded_processor(spec, tokenizer if tokenizer is not None else
                                       renderer.tokenizer if renderer is not None else None)
        if processor is None:
            return None
        return cls(ServedMedia(processor, spec.truncation, handle, store, verify=verify),
                   MediaRenderer(processor, renderer) if renderer is not None else None)

    def files(self, triples: Sequence[tuple[int, int, int | None]]) -> list[list[Media.RowFile]]:
        """Each entry's media files, in order."""
        return [self.served.files(*triple) for triple in triples]

    def render(self, reader: EntryReader, renderer: Renderer, triples: Sequence[tuple[int, int, int | None]],
               files: Sequence[Sequence[Media.RowFile]]) -> list[Rendered]:
        """Entries rendered on fetch: those without media in one tokenizer batch, each with media
        by the processor's renderer."""
        return render_entries(reader, renderer, self.renderer, triples, files)

    def add(self, served: list[dict[str, Any]], triples: Sequence[tuple[int, int, int | None]],
            files: Sequence[Sequence[Media.RowFile]], names: Sequence[str]) -> list[dict[str, Any]]:
        """Served entries with their media features (entries without media as they are)."""
        return [self.served.add(one, found, name, triple[1]) if found else one
                for one, triple, found, name in zip(served, triples, files, names)]


def render_entries(reader: EntryReader, renderer: Renderer, media: MediaRenderer | None,
                   triples: Sequence[tuple[int, int, int | None]],
                   files: Sequence[Sequence[Media.RowFile]]) -> list[Rendered]:
    """Entries ``(dataset id, row, cut)`` rendered on fetch: those without media ``files`` in one
    tokenizer batch, each with media by ``media`` (a processor's spec's)."""
    items = [(reader.sample(*triple), triple[2] is not None) for triple in triples]
    text = [k for k, found in enumerate(files) if not found]  # the rest hold media
    rendered = dict(zip(text, renderer.render_many([items[k] for k in text])))
    for k, found in enumerate(files):
        if found:
            assert media is not None  # a spec with media renders them
            rendered[k] = media.render(items[k][0], [medium(file) for file in found])
            rendered[k].extra_info = extra_info(items[k][0])
    return [rendered[k] for k in range(len(items))]

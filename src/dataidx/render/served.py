"""Rendered reads: a mixture's training entries under a stored spec, rendered on fetch, or read
from the spec's stored tokens when it has them (:mod:`.from_tokens`).

Opening checks that the tokenizer still has the fingerprint the lengths were computed with (or
that the token file is the spec's), so training never mixes stored lengths with a different
tokenization. Only the positions whose
entries train (status ok or truncated) are served; when every entry trains (the spec records
how many do) no position array is built at all.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import StaleStoreError, UsageError
from ..read import StoreReader
from ..sources import paused_gc
from ..store import Closable, Media, Mixtures, Specs, StoreHandle
from .from_tokens import TokenServer, open_tokens
from .media_features import ServedMedia, medium
from .media_render import MediaRenderer
from .renderer import Rendered, Renderer, extra_info
from .spec import StoredSpec, read_spec, recorded_processor
from .token_file import TokenFile


def open_spec(handle: StoreHandle, spec: str, tokenizer: Any, *,
              trust_remote_code: bool = False) -> tuple[StoredSpec, Renderer]:
    """A stored spec and its renderer, with the tokenizer checked to be the one it recorded."""
    stored = read_spec(handle, spec)
    return stored, stored.renderer(tokenizer, trust_remote_code=trust_remote_code)


class RenderedMixture(Closable):
    """Training entries of one mixture, rendered with a stored spec: ``input_ids``, ``labels``...

    A spec whose tokens are stored (``dataidx render --store-tokens``) is served from them, with no
    tokenizer loaded; ``tokens`` is its token file (None: rendered on fetch, ``renderer`` set;
    ``stored_only`` refuses that instead, for a pass that reads the words themselves).
    ``trust_remote_code`` lets a spec rendered with ``--trust-remote-code`` load its tokenizer,
    running its folder's code; without it such a spec is refused.
    Reads through its reader's store handle; ``close()`` (or a ``with`` block) gives it back.

    Example::

        with RenderedMixture("demo.db", "default", spec="default") as rendered:
            rendered.get(0)["input_ids"]
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, spec: str,
                 tokenizer: Any = None, verify: bool = True, epoch: int = 0, stored_only: bool = False,
                 trust_remote_code: bool = False) -> None:
        self.reader = StoreReader(path, mixture, verify=verify, epoch=epoch, reads={"spec": spec})
        try:
            handle = self.reader.handle
            self.spec = read_spec(handle, spec)
            self.tokens: TokenFile | None = open_tokens(handle, self.reader.path, self.spec, tokenizer,
                                                           required=stored_only)
            self.renderer: Renderer | None = (None if self.tokens is not None else
                                              self.spec.renderer(tokenizer, trust_remote_code=trust_remote_code))
            self.server = (TokenServer(self.tokens, self.spec.id, self.reader.datasets, self.reader.path)
                           if self.tokens is not None else None)
            self._open_media(tokenizer, verify=verify, stored_only=stored_only)
            self._find_positions()
        except BaseException:
            self.reader.close()
            raise

    def close(self) -> None:
        """Give back the store handle of this process (see :meth:`StoreReader.close`)."""
        self.reader.close()

    def _open_media(self, tokenizer: Any, *, verify: bool, stored_only: bool) -> None:
        """A processor's spec: its processor (checked to be the recorded one), the entries' media
        and, rendering on fetch, the renderer of entries that hold media. A pass over stored words
        alone (``stored_only``: an export) needs none of them."""
        self.media: ServedMedia | None = None
        self.media_renderer: MediaRenderer | None = None
        if self.spec.processor is None or stored_only:
            return
        processor = recorded_processor(self.spec, tokenizer if tokenizer is not None else
                                       self.renderer.tokenizer if self.renderer is not None else None)
        self.media = ServedMedia(processor, self.spec.truncation, self.reader.handle, self.reader.path, verify=verify)
        if self.renderer is not None:
            self.media_renderer = MediaRenderer(processor, self.renderer)

    def dummy_media_fragment(self) -> dict[str, Any]:
        """LLaMA-Factory v1's dummy image fragment for this spec's processor, for
        ``Collator(dummy_media=...)``: a batch without images gets it, so every rank runs the
        vision tower. A UsageError for a spec without a processor."""
        if self.media is None:
            raise UsageError(f"render spec '{self.spec.name}' was not rendered with a processor: its entries have no "
                             "media features, and no vision tower to keep in step")
        return self.media.dummy_fragment()

    def _find_positions(self) -> None:
        """The positions of the epoch served whose entries train (None: all of them). With stored
        tokens, which entries train is read from the token file's index, not the store's lengths."""
        self.positions: np.ndarray | None = None
        if self.spec.training_entries != self.spec.entries:
            handle = self.reader.handle
            mixtures = Mixtures(handle)
            entries = mixtures.entries_of(mixtures.get(self.reader.mixture, self.reader.epoch))
            trains = (self.tokens.trains(entries) if self.tokens is not None
                      else Specs(handle).lengths(self.spec.id).of(entries)[1])
            self.positions = np.flatnonzero(trains)

    def set_epoch(self, epoch: int) -> None:
        """Serve epoch ``epoch`` of the mixture from now on."""
        self.reader.set_epoch(epoch)
        self._find_positions()

    def __len__(self) -> int:
        return len(self.reader) if self.positions is None else len(self.positions)

    def _position(self, index: int) -> int:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} training entries of {self.reader.serving} "
                             f"under spec '{self.spec.name}'")
        index %= len(self)
        return index if self.positions is None else int(self.positions[index])

    def _positions(self, indices: list[int]) -> list[int]:
        """:meth:`_position` of many indices (the length taken once: a fetch from tokens is short)."""
        size, chosen = len(self), self.positions
        if any(not -size <= index < size for index in indices):
            self._position(next(index for index in indices if not -size <= index < size))  # raises IndexError
        if chosen is None:
            return [index % size for index in indices]
        return [int(chosen[index % size]) for index in indices]

    def skipped_items(self, lists: Sequence[str] | None = None) -> np.ndarray:
        """The training entries (indices of this reader) the mixture's skip lists (or lists
        ``lists``) leave out."""
        positions = self.reader.skipped_items(lists)
        if self.positions is None:
            return positions
        at = np.searchsorted(self.positions, positions)
        inside = at < len(self.positions)
        return at[inside][self.positions[at[inside]] == positions[inside]]  # positions that train

    def positions_at(self, indices: list[int]) -> list[int]:
        """The mixture position of each of training entries ``indices`` (what ``dataidx steps``
        names: an order indexes the training entries, a reader the mixture's positions)."""
        return self._positions(indices)

    def get(self, index: int) -> dict[str, Any]:
        if self.server is not None and self.media is None:
            return self.server.one(self.reader.entry_at(self._position(index)), self.reader.fetch)
        return self.get_many([index])[0]

    def get_many(self, indices: list[int]) -> list[dict[str, Any]]:
        """Rendered entries at many indices, in the order asked (at most two SQL queries and one
        tokenizer batch; from stored tokens, none for positions in the mixture's runs)."""
        positions = self._positions(indices)
        if self.server is not None:
            served = self.server.get(self.reader.entries_at(positions), self.reader.fetch)
            if self.media is None:
                return served
            triples = self.reader.triples(positions)
            return [self._with_media(one, triple, self.media.files(*triple)) for one, triple in zip(served, triples)]
        assert self.renderer is not None  # no stored tokens: rendered on fetch
        triples = self.reader.triples(positions)
        files = [self.media.files(*triple) if self.media is not None else [] for triple in triples]
        with paused_gc():
            rendered = render_entries(self.reader, self.renderer, self.media_renderer, triples, files)
        return [self._with_media(self._served(triple[0], one), triple, found)
                for triple, one, found in zip(triples, rendered, files)]

    def _with_media(self, served: dict[str, Any], triple: tuple[int, int, int | None],
                    files: list[Media.RowFile]) -> dict[str, Any]:
        if self.media is None or not files:
            return served
        return self.media.add(served, files, self.reader.datasets[triple[0]].name, triple[1])

    def _served(self, dataset_id: int, rendered: Rendered) -> dict[str, Any]:
        if not rendered.trains:  # the stored status said it trains: the data no longer agrees
            raise StaleStoreError(f"{self.reader.path}: an entry now renders as {rendered.status} ({rendered.detail}) "
                                  f"under spec '{self.spec.name}'; run dataidx render again")
        return {"_dataset_name": self.reader.datasets[dataset_id].name, **rendered.as_dict()}


def render_entries(reader: StoreReader, renderer: Renderer, media: MediaRenderer | None,
                   triples: list[tuple[int, int, int | None]], files: list[list[Media.RowFile]]) -> list[Rendered]:
    """Entries ``(dataset id, row, cut)`` rendered on fetch: those without media ``files`` in one
    tokenizer batch, each with media by ``media`` (a processor's spec)."""
    items = [(reader.sample(*triple), triple[2] is not None) for triple in triples]
    text = [k for k, found in enumerate(files) if not found]  # the rest hold media
    rendered = dict(zip(text, renderer.render_many([items[k] for k in text])))
    for k, found in enumerate(files):
        if found:
            assert media is not None  # a spec with media renders them
            rendered[k] = media.render(items[k][0], [medium(file) for file in found])
            rendered[k].extra_info = extra_info(items[k][0])
    return [rendered[k] for k in range(len(items))]


def render_positions(path: str | os.PathLike[str], mixture: str, spec: str, positions: list[int], *,
                     verify: bool = True, epoch: int = 0,
                     trust_remote_code: bool = False) -> tuple[Renderer, list[tuple[str, int, int | None, Rendered]]]:
    """Mixture positions rendered under a spec, whatever their status: the renderer, and per
    position its dataset name, row, cut and rendering (one read, one tokenizer batch)."""
    with StoreReader(path, mixture, verify=verify, epoch=epoch) as reader:
        stored, renderer = open_spec(reader.handle, spec, None, trust_remote_code=trust_remote_code)
        triples = reader.triples(positions)
        processor = recorded_processor(stored, renderer.tokenizer)
        if processor is None:
            files: list[list[Media.RowFile]] = [[] for _ in triples]
            media = None
        else:
            served = ServedMedia(processor, stored.truncation, reader.handle, reader.path, verify=verify)
            files, media = [served.files(*triple) for triple in triples], MediaRenderer(processor, renderer)
        rendered = render_entries(reader, renderer, media, triples, files)
    return renderer, [(reader.datasets[dataset_id].name, row, cut, one)
                      for (dataset_id, row, cut), one in zip(triples, rendered)]


def rendered_position(path: str | os.PathLike[str], mixture: str, spec: str, positions: list[int], *,
                      verify: bool = True, epoch: int = 0, trust_remote_code: bool = False) -> list[dict[str, Any]]:
    """Mixture positions rendered with a spec, whatever their status (``dataidx show --render``):
    each dict has ``status`` (and ``detail`` when there is one) besides the model inputs."""
    _, rendered = render_positions(path, mixture, spec, positions, verify=verify, epoch=epoch,
                                   trust_remote_code=trust_remote_code)
    return [{"_dataset_name": name, "status": one.status, **({"detail": one.detail} if one.detail else {}),
             **one.as_dict()} for name, _, _, one in rendered]

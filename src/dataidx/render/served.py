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
from ..store import Closable, Mixtures, Specs, StoreHandle
from .from_tokens import TokenServer, open_tokens
from .media_features import MediaServing
from .renderer import Rendered, Renderer
from .spec import StoredSpec, read_spec
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
            # a processor's spec serves its media; a pass over stored words alone (an export) needs none
            self.media = None if stored_only else MediaServing.open(self.spec, handle, self.reader.path,
                                                                    self.renderer, tokenizer, verify=verify)
            self._find_positions()
        except BaseException:
            self.reader.close()
            raise

    def close(self) -> None:
        """Give back the store handle of this process (see :meth:`StoreReader.close`)."""
        self.reader.close()

    def dummy_media_fragment(self) -> dict[str, Any]:
        """LLaMA-Factory v1's dummy image fragment for this spec's processor, for
        ``Collator(dummy_media=...)``: a batch without images gets it, so every rank runs the
        vision tower. A UsageError for a spec without a processor."""
        if self.media is None:
            raise UsageError(f"render spec '{self.spec.name}' was not rendered with a processor: its entries have no "
                             "media features, and no vision tower to keep in step")
        return self.media.served.dummy_fragment()

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
            return self.media.add(served, triples, self.media.files(triples), self._names(triples))
        assert self.renderer is not None  # no stored tokens: rendered on fetch
        triples = self.reader.triples(positions)
        if self.media is None:
            with paused_gc():
                rendered = self.renderer.render_many([(self.reader.sample(*triple), triple[2] is not None)
                                                      for triple in triples])
            return [self._served(triple[0], one) for triple, one in zip(triples, rendered)]
        files = self.media.files(triples)
        with paused_gc():
            rendered = self.media.render(self.reader, self.renderer, triples, files)
        return self.media.add([self._served(triple[0], one) for triple, one in zip(triples, rendered)], triples,
                              files, self._names(triples))

    def _names(self, triples: list[tuple[int, int, int | None]]) -> list[str]:
        return [self.reader.datasets[dataset_id].name for dataset_id, _, _ in triples]

    def _served(self, dataset_id: int, rendered: Rendered) -> dict[str, Any]:
        if not rendered.trains:  # the stored status said it trains: the data no longer agrees
            raise StaleStoreError(f"{self.reader.path}: an entry now renders as {rendered.status} ({rendered.detail}) "
                                  f"under spec '{self.spec.name}'; run dataidx render again")
        return {"_dataset_name": self.reader.datasets[dataset_id].name, **rendered.as_dict()}


def render_positions(path: str | os.PathLike[str], mixture: str, spec: str, positions: list[int], *,
                     verify: bool = True, epoch: int = 0,
                     trust_remote_code: bool = False) -> tuple[Renderer, list[tuple[str, int, int | None, Rendered]]]:
    """Mixture positions rendered under a spec, whatever their status: the renderer, and per
    position its dataset name, row, cut and rendering (one read, one tokenizer batch)."""
    with StoreReader(path, mixture, verify=verify, epoch=epoch) as reader:
        stored, renderer = open_spec(reader.handle, spec, None, trust_remote_code=trust_remote_code)
        triples = reader.triples(positions)
        media = MediaServing.open(stored, reader.handle, reader.path, renderer, None, verify=verify)
        if media is None:
            rendered = renderer.render_many([(reader.sample(*triple), triple[2] is not None) for triple in triples])
        else:
            rendered = media.render(reader, renderer, triples, media.files(triples))
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

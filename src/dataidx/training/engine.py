"""``DataEngine``: a ``torch.utils.data.Dataset`` over one mixture of a store.

With :mod:`.collate`, the only modules that import torch. It returns the same dicts as LLaMA-Factory v1's
``DataEngine`` (``{"_dataset_name": name, **sample}`` with ``messages`` cut to the entry), but
opens instantly, holds no per-entry Python objects, and batches its reads for a DataLoader.
"""

from __future__ import annotations

import operator
import os
from typing import Any

from torch.utils.data import Dataset

from ..cache import engine_store
from ..convert import Sample
from ..errors import UsageError, hide_passwords
from ..pack import RenderedPacks
from ..read import StoreReader, to_hf
from ..render import RenderedMixture
from ..spec import DEFAULT_SEED
from ..store import Closable
from .state import check_state, dataset_state


def _position(index: Any) -> int:
    """An integer position (NumPy and torch integers too); anything else is a TypeError."""
    if isinstance(index, bool):
        raise TypeError("DataEngine indices must be int, slice or list of int, not bool")
    try:
        return operator.index(index)
    except TypeError:
        raise TypeError(f"DataEngine indices must be int, slice or list of int, not {type(index).__name__}") from None


#: One item: a converted sample, or with ``render=`` a rendered one (``input_ids``, ``labels``...).
Item = Sample | dict[str, Any]
#: Items of one fetch: all converted samples, or all rendered ones.
Items = list[Sample] | list[dict[str, Any]]


class DataEngine(Closable, Dataset):
    """Entries of mixture ``mixture`` of the store at ``path``, converted on fetch.

    ``path`` is a store file, a ``sqlite:///`` URL or a ``postgresql://...?schema=NAME`` URL
    (a store a team shares; see docs/postgres.md).

    With ``render=SPEC`` (a spec stored by ``dataidx render``) it serves the entries that train
    under that spec, rendered to ``input_ids``/``labels``/``loss_weights``/``attention_mask``;
    ``tokenizer`` overrides loading it from the spec's recorded path (it must be the same);
    ``trust_remote_code`` lets that load run the tokenizer folder's own code, which a spec rendered
    with ``--trust-remote-code`` needs (refused without it).

    ``epoch`` (or :meth:`set_epoch`, as with ``DistributedSampler``) serves one epoch of a
    mixture stored with ``dataidx mix --epochs N``; each epoch is its own seeded draw.

    ``path`` may also be what LLaMA-Factory v1's ``DataEngine`` takes: a v1 YAML (a local file, or
    ``org/repo/file.yaml`` in a hub dataset repo), a local data file or folder (one dataset named
    ``default``), or a hub dataset id (``org/name``). The store is built on first use into the
    cache folder (``$DATAIDX_CACHE``, default ``~/.cache/dataidx``) with ``seed`` and
    ``sampling``, and rebuilt, with a warning, when a source changes. A hub name comes through the
    local Hugging Face cache; offline and not cached, it is one error line at once.

    Example::

        with DataEngine("demo.db") as engine:
            engine[0], engine[-1], engine[2:5], engine[[7, 3]]
        DataEngine("data/demo_sft.yaml")   # drop-in for LLaMA-Factory v1's DataEngine(yaml)
        DataEngine("data/alpaca_en_demo.json"), DataEngine("org/dataset")   # a data file, a hub dataset
        DataLoader(engine, batch_size=32, num_workers=2, collate_fn=list)
        DataLoader(DataEngine("demo.db", render="default"), batch_size=8, collate_fn=Collator(pad_token_id=0))
    """

    #: A map-style dataset with a known length: what LLaMA-Factory v1's trainers check before
    #: they sample it (its DPO trainer refuses streaming datasets).
    streaming = False

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, verify: bool = True,
                 render: str | None = None, tokenizer: Any = None, seed: int = DEFAULT_SEED,
                 sampling: str = "exact", epoch: int = 0, trust_remote_code: bool = False) -> None:
        # What v1's DataEngine takes (a YAML, local or in a hub repo, a data file or folder, a hub
        # dataset id) is built into the cache once and opened from there after; a store is itself.
        path = engine_store(path, seed=seed, sampling=sampling)
        self.mixture = mixture
        self.reader: StoreReader | RenderedMixture
        if render is None:
            self.reader = StoreReader(path, mixture, verify=verify, epoch=epoch)
        else:
            self.reader = RenderedMixture(path, mixture, spec=render, tokenizer=tokenizer, verify=verify, epoch=epoch,
                                          trust_remote_code=trust_remote_code)

    def __len__(self) -> int:
        return len(self.reader)

    def close(self) -> None:
        """Give back this process's store handle (a DataLoader worker's copy holds its own, given
        back when the worker ends); later reads are refused. ``with DataEngine(...) as engine:``
        closes it too."""
        self.reader.close()

    @property
    def epoch(self) -> int:
        """The epoch served."""
        return self._entries.epoch

    def set_epoch(self, epoch: int) -> None:
        """Serve epoch ``epoch`` from now on. Call it before each epoch's ``DataLoader`` iterator is
        made: workers started then copy the dataset with its epoch (persistent workers keep theirs).
        It is the hook trainers call every epoch, so past the stored epochs it serves
        ``epoch % epochs`` (logged once); ``DataEngine(..., epoch=k)`` names a stored epoch."""
        self.reader.set_epoch(epoch)

    @property
    def _entries(self) -> StoreReader:
        return self.reader.reader if isinstance(self.reader, RenderedMixture) else self.reader

    def state_dict(self) -> dict[str, Any]:
        """What a ``StatefulDataLoader`` state records of this dataset: the epoch served and the
        identity of what it reads (see :mod:`.state`)."""
        return dataset_state(self.epoch, self._entries.identity)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Serve the epoch ``state`` records, if it was saved over this store's mixture (and spec)."""
        entries = self._entries
        self.set_epoch(check_state(state, identity=entries.identity, store=entries.path, mixture=self.mixture,
                                   epochs=len(entries.epochs)))

    def __getitem__(self, index: int | slice | list[int]) -> Item | Items:
        if isinstance(index, slice):
            return self.reader.get_many(list(range(*index.indices(len(self)))))
        if isinstance(index, list):
            return self.reader.get_many([_position(i) for i in index])
        return self.reader.get(_position(index))

    def dummy_media_fragment(self) -> dict[str, Any]:
        """v1's dummy image fragment of the spec's processor, for ``Collator(dummy_media=...)``
        (:meth:`RenderedMixture.dummy_media_fragment`); ``render=`` must name a processor's spec."""
        if not isinstance(self.reader, RenderedMixture):
            raise UsageError("the dummy media fragment is a rendered spec's: open the engine with render=SPEC")
        return self.reader.dummy_media_fragment()

    def skipped_items(self) -> Any:
        """The items of the epoch served (indices of this dataset) that the mixture's skip lists
        (``dataidx skip``) leave out of an :class:`~dataidx.training.OrderSampler`'s order."""
        return self.reader.skipped_items()

    def __getitems__(self, indices: list[int]) -> Items:
        """Batched fetch used by ``DataLoader``: one SQL query for the whole batch."""
        return self.reader.get_many([_position(i) for i in indices])

    def to_hf(self) -> Any:
        """The mixture's samples as a ``datasets.Dataset`` (standard schema, in mixture order),
        for code that wants one; it is a copy written once to the HF cache."""
        if isinstance(self.reader, RenderedMixture):
            raise TypeError("to_hf() exports converted samples; open the DataEngine without render=")
        return to_hf(self.reader)

    def __repr__(self) -> str:
        path = self._entries.path
        epoch = f", epoch={self.epoch}" if self.epoch else ""
        return f"DataEngine({hide_passwords(path)!r}, mixture={self.mixture!r}{epoch}, entries={len(self)})"


class PackedDataset(Closable, Dataset):
    """The packs of a plan stored by ``dataidx pack``: item ``i`` is the list of pack ``i``'s
    rendered members. Batch it with :class:`~dataidx.training.Collator`, which lays each pack out
    as one row with restarting ``position_ids`` and ``cu_seq_lens``.

    Example::

        packs = PackedDataset("demo.db", plan="default")
        DataLoader(packs, batch_size=2, collate_fn=Collator(pad_token_id=0))
    """

    def __init__(self, path: str | os.PathLike[str], plan: str = "default", *, tokenizer: Any = None,
                 verify: bool = True, epoch: int = 0, trust_remote_code: bool = False) -> None:
        self.packs = RenderedPacks(path, plan, tokenizer=tokenizer, verify=verify, epoch=epoch,
                                   trust_remote_code=trust_remote_code)

    def __len__(self) -> int:
        return len(self.packs)

    def close(self) -> None:
        """Give back this process's store handle (see :meth:`DataEngine.close`)."""
        self.packs.close()

    def set_epoch(self, epoch: int) -> None:
        """Serve the packs of epoch ``epoch`` (a plan of a mixture of several epochs has a plan per
        epoch); past the stored epochs, ``epoch % epochs``, as :meth:`DataEngine.set_epoch`."""
        self.packs.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The epoch served and the identity of the plan read, for a ``StatefulDataLoader`` state."""
        return dataset_state(self.packs.epoch, self.packs.reader.identity)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Serve the epoch ``state`` records, if it was saved over this store's plan."""
        packs = self.packs
        self.set_epoch(check_state(state, identity=packs.reader.identity, store=packs.reader.path,
                                   mixture=packs.mixture, epochs=len(packs.epochs)))

    def skipped_items(self) -> Any:
        """The packs of the epoch served that hold an entry the mixture's skip lists leave out."""
        return self.packs.skipped_items()

    @property
    def strategy(self) -> str:
        """How the plan was made: ``best-fit`` packs, or LLaMA-Factory v1's ``dynamic`` (padded
        micro-batches: collate with ``Collator(packs="rows")``) or ``dynamic-padding-free``."""
        return self.packs.strategy

    @property
    def balanced_for(self) -> tuple[int, int] | None:
        """``(world_size, micro_batches)`` of a plan balanced by compute for them (an
        :class:`~dataidx.training.OrderSampler` reads it only so), else None."""
        return self.packs.balanced_for

    def __getitem__(self, index: int) -> list[dict[str, Any]]:
        return self.packs.get(_position(index))

    def __repr__(self) -> str:
        return f"PackedDataset({hide_passwords(self.packs.reader.path)!r}, plan={self.packs.plan!r}, packs={len(self)})"

"""Packed reads: the packs of a stored plan, item ``i`` being pack ``i``'s members rendered, or read
from the spec's stored tokens when it has them.

Opening checks the tokenizer (or the token file) as a rendered read does, and every member is
checked to render to the length the plan packed it by, so training never mixes a plan with
another tokenization.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import StaleStoreError, StoreError, UsageError
from ..read import EntryReader
from ..render import MediaServing, TokenFile, TokenServer, open_tokens, read_spec
from ..sources import paused_gc
from ..store import Closable, Mixtures, Orders, Plans
from .merging import MODES
from .sequences import merged_sample


class RenderedPacks(Closable):
    """The packs of a stored plan; item ``i`` is pack ``i``: its members rendered, in slot order.

    Reads through its reader's store handle; ``close()`` (or a ``with`` block) gives it back.
    ``stored_only`` refuses a spec without stored tokens rather than load its tokenizer;
    ``trust_remote_code`` lets it load one of its folder's code (a spec rendered with ``--trust-remote-code``).

    Example::

        with RenderedPacks("demo.db", "default") as packs:
            [len(sample["input_ids"]) for sample in packs.get(0)]
    """

    def __init__(self, path: str | os.PathLike[str], plan: str = "default", *, tokenizer: Any = None,
                 verify: bool = True, epoch: int = 0, stored_only: bool = False,
                 trust_remote_code: bool = False) -> None:
        self.reader = EntryReader(path, verify=verify, reads={"plan": plan})
        self.plan = plan
        try:
            handle = self.reader.handle
            plans = Plans(handle)
            found = plans.find(plan)
            self.plan_id, self.capacity, spec, self.mixture, self.merge_cuts = found[:5]
            #: ``best-fit``, or v1's ``dynamic`` (padded micro-batches) or ``dynamic-padding-free``
            self.strategy = found.strategy
            #: ``(world_size, micro_batches)`` of a plan balanced by compute for them, else None
            self.balanced_for: tuple[int, int] | None = (
                (found.world_size, found.micro_batches) if found.balance == "compute" and found.world_size is not None
                and found.micro_batches is not None else None)
            if self.merge_cuts not in ("no", *MODES):  # a store's value, read as data
                raise StoreError(f"{self.reader.path}: plan '{plan}' merges cuts as {self.merge_cuts!r}, which this "
                                 "dataidx does not know; the store is damaged or was made by a newer dataidx")
            self.epochs = [(epoch.first_pack, epoch.packs) for epoch in plans.epochs(self.plan_id)]
            self.spec = read_spec(handle, spec)
            self.tokens: TokenFile | None = open_tokens(handle, self.reader.path, self.spec, tokenizer,
                                                           required=stored_only or self.merge_cuts != "no")
            self.renderer = (None if self.tokens is not None else
                             self.spec.renderer(tokenizer, trust_remote_code=trust_remote_code))
            self.server = (TokenServer(self.tokens, self.spec.id, self.reader.datasets, self.reader.path)
                           if self.tokens is not None else None)
            self.media = None if stored_only else MediaServing.open(self.spec, handle, self.reader.path,
                                                                    self.renderer, tokenizer, verify=verify)
            if self.media is not None and self.merge_cuts != "no":
                raise UsageError(f"plan '{plan}' merges cuts, and its spec '{spec}' renders media: merged cuts would "
                                 "serve a conversation's images once per cut they share; pack again without "
                                 "--merge-cuts")
            self._serve(Mixtures.check_epoch(epoch, len(self.epochs), self.mixture))
        except BaseException:
            self.reader.close()
            raise

    def close(self) -> None:
        """Give back the store handle of this process (see :meth:`EntryReader.close`)."""
        self.reader.close()

    def set_epoch(self, epoch: int) -> None:
        """Serve the packs of epoch ``epoch`` of the plan's mixture from now on: a trainer's
        per-epoch hook, so past the stored epochs it serves ``epoch % epochs``."""
        self._serve(Mixtures.served_epoch(epoch, len(self.epochs), self.mixture, self.reader.path))

    def _serve(self, epoch: int) -> None:
        self.first_pack, self.packs = self.epochs[epoch]
        self.epoch = epoch

    def __len__(self) -> int:
        return self.packs

    def _members(self, index: int) -> list[tuple[int, int, int, int, int]]:
        """``(entry id, tokens, joined to the next, trains, members)`` of pack ``index``'s members, in
        slot order; a pack whose rows are not what its plan served when it was made is refused."""
        if not -self.packs <= index < self.packs:
            raise IndexError(f"pack {index} out of range for plan '{self.plan}' of {self.packs} packs"
                             + (f" in epoch {self.epoch} of {len(self.epochs)}" if len(self.epochs) > 1 else ""))
        members = Plans(self.reader.handle).members(self.spec.id, self.plan_id, self.first_pack + index % self.packs)
        if (not members or len(members) != members[0][4] or not all(m[3] for m in members)
                or (self.merge_cuts == "no" and any(m[2] for m in members))):
            raise self._damaged(index % self.packs, members)
        return members

    def _damaged(self, pack: int, members: list[tuple[int, int, int, int, int]]) -> StoreError:
        """What is wrong with a pack's member rows, in one line."""
        if not members or len(members) != members[0][4]:
            what = (f"names {members[0][4]} members and {len(members)} are there" if members
                    else "has no member rows")
        elif lost := sum(tokens is None for _, tokens, _, _, _ in members):
            what = f"has {lost} members without a length under spec '{self.spec.name}'"
        elif lost := sum(not trains for _, _, _, trains, _ in members):
            what = f"has {lost} members that do not train under spec '{self.spec.name}'"
        else:
            what = "joins cuts into one sequence in a plan that merges none"
        return StoreError(f"{self.reader.path}: pack {pack} of plan '{self.plan}' {what}; the store is damaged or "
                          "was edited (dataidx verify says what else is)")

    def skipped_items(self, lists: Sequence[str] | None = None) -> np.ndarray:
        """The packs of the epoch served that hold an entry the mixture's skip lists (or lists
        ``lists``) leave out: an order over the plan leaves the whole pack out (planning again
        without them keeps the rest)."""
        wanted = Orders(self.reader.handle).skipped(self.mixture, lists)
        if not wanted:
            return np.empty(0, dtype=np.int64)
        packs = Plans(self.reader.handle).packs_holding(self.plan_id, self.first_pack,
                                                        self.first_pack + self.packs - 1, wanted)
        return np.asarray(packs, dtype=np.int64) - self.first_pack

    def member_entries(self, index: int) -> list[int]:
        """The base entry ids of pack ``index``'s members, in slot order (what ``dataidx steps``
        names for a run that read the plan)."""
        return [member[0] for member in self._members(index)]

    def get(self, index: int) -> list[dict[str, Any]]:
        """The rendered members of pack ``index`` (negative counts from the end)."""
        members = self._members(index)
        if self.server is not None:  # stored at the lengths the plan packed: nothing to check per member
            served = self.server.get([member[0] for member in members], self.reader.fetch)
            if self.media is not None:
                triples = self.reader.entries_by_id([member[0] for member in members])
                return self.media.add(served, triples, self.media.files(triples), self._names(triples))
            return served if self.merge_cuts == "no" else _merged(served, [member[2] for member in members],
                                                                  trees=self.merge_cuts == "trees")
        assert self.renderer is not None  # no stored tokens: rendered on fetch
        triples = self.reader.entries_by_id([member[0] for member in members])
        files = self.media.files(triples) if self.media is not None else None
        samples = []
        with paused_gc():
            if self.media is not None and files is not None:
                rendered_all = self.media.render(self.reader, self.renderer, triples, files)
            else:
                rendered_all = self.renderer.render_many(
                    [(self.reader.sample(dataset_id, row, cut), cut is not None) for dataset_id, row, cut in triples])
        for (dataset_id, _, _), (_, tokens, *_), rendered in zip(triples, members, rendered_all):
            if rendered.tokens != tokens or not rendered.trains:
                raise StaleStoreError(
                    f"{self.reader.path}: plan '{self.plan}' expects {tokens} tokens for an entry that now renders "
                    f"to {rendered.tokens} ({rendered.status}); run dataidx render and dataidx pack again"
                )
            samples.append({"_dataset_name": self.reader.datasets[dataset_id].name, **rendered.as_dict()})
        if self.media is not None and files is not None:
            return self.media.add(samples, triples, files, self._names(triples))
        return samples

    def _names(self, triples: Sequence[tuple[int, int, int | None]]) -> list[str]:
        return [self.reader.datasets[dataset_id].name for dataset_id, _, _ in triples]


def _merged(served: list[dict[str, Any]], joined: list[int], *, trees: bool) -> list[dict[str, Any]]:
    """A pack's samples: each run of members joined to the next trained as one sequence."""
    samples, run = [], []
    for sample, joins in zip(served, joined):
        run.append(sample)
        if not joins:
            samples.append(run[0] if len(run) == 1 else merged_sample(run, trees=trees))
            run = []
    if run:
        raise StaleStoreError("a pack ends inside a merged conversation; the store is damaged")
    return samples

"""What a run's order reads (a mixture, a render spec's training entries, or a plan's packs), for
the commands about orders: the order of an epoch, its steps, and the entries each item holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import UsageError


class RunSource:
    """What a run's order indexes (``items``: a mixture, a spec's training entries or a plan's
    packs), and the entries each item holds."""

    def __init__(self, store: str, mixture: str, spec: str | None, plan: str | None, *,
                 trust_remote_code: bool = False) -> None:
        if spec is not None and plan is not None:
            raise UsageError("--render and --plan name two different runs; give one")
        self.store, self.kind = store, "plan" if plan else "spec" if spec else "mixture"
        self.target = spec or plan  # the spec or plan read (None: the mixture itself)
        self.items: Any
        if plan is not None:
            from ..pack import RenderedPacks

            self.items = RenderedPacks(store, plan, trust_remote_code=trust_remote_code)
        elif spec is not None:
            from ..render import RenderedMixture

            self.items = RenderedMixture(store, mixture, spec=spec, trust_remote_code=trust_remote_code)
        else:  # entries only, not their rows: no converter or pyarrow loaded (dataidx steps starts fast)
            from ..read import MixtureEntries

            self.items = MixtureEntries(store, mixture)

    def __enter__(self) -> RunSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.items.close()

    def order(self, epoch: int, seed: int, *, lists: Sequence[str] | None) -> Any:
        """The order a run reads in epoch ``epoch`` (a SkippingOrder): without what the mixture's
        skip lists leave out (None), or only lists ``lists`` (none: the whole order)."""
        import numpy as np  # here, not at the top: `dataidx info` and every other command would load it

        from ..read import SkippingOrder, TrainingOrder

        # Past the stored epochs, epoch % epochs, as a run's set_epoch serves it (without the note a
        # run logs once: here the epoch is the one asked for).
        self.items.set_epoch(epoch % self.stored_epochs())
        skipped = self.items.skipped_items(lists) if lists is None or lists else np.empty(0, dtype=np.int64)
        return SkippingOrder(TrainingOrder(len(self.items), seed=seed, epoch=epoch), skipped)

    def steps(self, epoch: int, seed: int, global_batch_size: int, first: int, last: int, tail: str, *,
              lists: Sequence[str] | None) -> list[tuple[int, int, int]]:
        """``(step, index, item)`` of sampler steps ``first .. last`` (from 0) of a run's epoch ``epoch``."""
        from ..read import step_items

        try:
            return step_items(self.order(epoch, seed, lists=lists), global_batch_size, first, last, tail)
        except IndexError as exc:
            raise UsageError(f"{self.store}: {exc}") from None

    def numbering(self, seed: int, global_batch_size: int, tail: str, accumulation: int, *,
                  lists: Sequence[str] | None) -> Any:
        """How a trainer numbers this run's steps (a RunNumbering): the sampler steps of each
        stored epoch, read as the run read them."""
        from ..read import RunNumbering, epoch_steps

        counts = [epoch_steps(self.order(stored, seed, lists=lists).length, global_batch_size, tail)
                  for stored in range(self.stored_epochs())]
        return RunNumbering(counts, accumulation)

    def run_steps(self, ranges: Sequence[tuple[int, int]], *, epoch: int | None, seed: int, global_batch_size: int,
                  tail: str, accumulation: int, lists: Sequence[str] | None) -> list[tuple[int, int, int, int, int]]:
        """``(epoch, global step, step, index, item)`` of every item steps ``ranges`` read: a
        trainer's global steps (from 1, across epochs), or with ``epoch`` the sampler's steps of
        that epoch (from 0). Each item says both numbers."""
        numbering = self.numbering(seed, global_batch_size, tail, accumulation, lists=lists)
        segments: list[tuple[int, int, int]] = []  # (epoch, first, last) sampler steps
        for first, last in ranges:
            if epoch is not None:
                segments.append((epoch, first, last))
                continue
            try:
                (begins, start, _), (ends, _, stop) = numbering.locate(first), numbering.locate(last)
            except IndexError as exc:
                raise UsageError(f"{self.store}: {exc}") from None
            segments += [(e, start if e == begins else 0, stop if e == ends else numbering.steps_in(e) - 1)
                         for e in range(begins, ends + 1)]
        return [(e, numbering.global_step(e, step), step, index, item) for e, first, last in segments
                if first <= last
                for step, index, item in self.steps(e, seed, global_batch_size, first, last, tail, lists=lists)]

    def steps_entries(self, step_ranges: Sequence[tuple[int, int]], *, epoch: int | None,
                      global_batch_size: int | None, seed: int, tail: str, accumulation: int,
                      numbered_with: tuple[str, ...]) -> tuple[list[int], str]:
        """The base entries steps ``step_ranges`` of a run read, and the request in words. Steps from
        a run's log count without the lists in force when it read them: with lists on the mixture,
        which ones is asked, not guessed (lists added since would move the steps onto other entries)."""
        if global_batch_size is None:
            raise UsageError("--steps needs the run's --global-batch-size")
        lists = self.lists_named(numbered_with)
        if lists is None:
            known = self.skip_lists()
            if known:
                raise UsageError(f"mixture '{self.mixture}' has skip lists {', '.join(known)}: a run's steps "
                                 "count without the lists in force when it started (or last resumed), and each list "
                                 "moves the later steps; say which with --numbered-with LIST (repeatable), or "
                                 "--numbered-with none")
            lists = []
        found = self.run_steps(step_ranges, epoch=epoch, seed=seed, global_batch_size=global_batch_size, tail=tail,
                               accumulation=accumulation, lists=lists)
        read: dict[int, list[int]] = {}  # epoch -> its sampler steps read
        for e, _, step, _, _ in found:
            read.setdefault(e, []).append(step)
        what = counted(step_ranges, epoch, accumulation)
        if epoch is None:  # the sampler's own numbers too, as dataidx steps --epoch and order_steps count
            what += " = " + "; ".join(counted(steps, e, 1) for e, steps in read.items())
        what += (f" of a run over {self.kind} '{self.target or self.mixture}' (global batch {global_batch_size}, "
                 f"seed {seed}, tail {tail}), numbered with skip lists: {', '.join(lists) or 'none'}")
        return self.entry_ids([item for *_, item in found]), what

    def lists_named(self, numbered_with: tuple[str, ...], *, no_skips: bool = False) -> list[str] | None:
        """The skip lists a run's steps are numbered with: those named (checked to be the
        mixture's), none, or None for every list the mixture has."""
        if no_skips:
            if numbered_with:
                raise UsageError("--no-skips and --numbered-with both say which lists the run read with; give one")
            return []
        if not numbered_with:
            return None
        if "none" in numbered_with:
            if len(numbered_with) > 1:
                raise UsageError("--numbered-with none names no list; leave out the others")
            return []
        known = self.skip_lists()
        unknown = [name for name in numbered_with if name not in known]
        if unknown:
            raise UsageError(f"no skip list '{unknown[0]}' (skip lists: {', '.join(known) or 'none'})")
        return list(numbered_with)

    def skip_lists(self) -> list[str]:
        """The names of the skip lists of the run's mixture, oldest first."""
        from ..store import Orders

        return [found.name for found in Orders(self.items_reader().handle).skip_lists(self.mixture)]

    def stored_epochs(self) -> int:
        """The epochs the store holds of what the run read."""
        return len(self.items.epochs if self.kind == "plan" else self.items_reader().epochs)

    def step_chunks(self, seed: int, global_batch_size: int, tail: str, *, lists: Sequence[str] | None,
                    chunk: int = 1 << 18) -> Any:
        """Every entry of every step of each stored epoch, as ``(epoch, steps, items, entries)``
        arrays a chunk of order indices at a time."""
        import numpy as np  # here, not at the top: `dataidx info` and every other command would load it

        from ..read import epoch_steps

        for stored in range(self.stored_epochs()):
            read = self.order(stored, seed, lists=lists)
            total = epoch_steps(read.length, global_batch_size, tail) * global_batch_size
            for start in range(0, total, chunk):
                indices = np.arange(start, min(start + chunk, total), dtype=np.int64)
                items = read.at(indices % read.length)
                if self.kind == "plan":
                    members = [self.items.member_entries(pack) for pack in items.tolist()]
                    sizes = np.array([len(m) for m in members], dtype=np.int64)
                    entries = np.array([e for m in members for e in m], dtype=np.int64)
                    yield stored, np.repeat(indices // global_batch_size, sizes), np.repeat(items, sizes), entries
                    continue
                positions = np.asarray(self._positions(items.tolist()), dtype=np.int64)
                yield stored, indices // global_batch_size, positions, self.items_reader().entry_ids(positions)

    def entry_ids(self, items: list[int]) -> list[int]:
        """The base entries the items hold (a pack, its members)."""
        if self.kind == "plan":
            return [entry for pack in items for entry in self.items.member_entries(pack)]
        return self.items_reader().entries_at(self._positions(items))

    @property
    def mixture(self) -> str:
        """The mixture the run's order is over (a plan's, for a plan)."""
        return self.items.mixture if self.kind == "plan" else self.items_reader().mixture

    def _positions(self, items: list[int]) -> list[int]:
        """The mixture positions of items of a mixture or a spec (a spec's are its training entries)."""
        return items if self.kind == "mixture" else self.items.positions_at(items)

    def items_reader(self) -> Any:
        """The reader of the store's entries under what the run read."""
        return self.items if self.kind == "mixture" else self.items.reader

    def entries(self, items: list[int]) -> list[list[tuple[int, str, int, int | None]]]:
        """Per item, ``(item, dataset, row, cut)`` of each entry it holds (a pack, several)."""
        reader = self.items_reader()
        names = {dataset_id: dataset.name for dataset_id, dataset in reader.datasets.items()}
        if self.kind == "plan":
            found = []
            for pack in items:
                triples = reader.entries_by_id(self.items.member_entries(pack))
                found.append([(pack, names[d], row, cut) for d, row, cut in triples])
            return found
        positions = self._positions(items)
        triples = reader.triples(positions)
        return [[(position, names[d], row, cut)] for position, (d, row, cut) in zip(positions, triples)]


def counted(steps: Sequence[int] | Sequence[tuple[int, int]], epoch: int | None, accumulation: int) -> str:
    """Steps and how they are counted, in words: ``global steps 3, 8-9 (a trainer's ...)``."""
    asked = spans(steps)
    if epoch is not None:
        return f"sampler steps {asked} of epoch {epoch} (from 0 in the epoch)"
    each = f", {accumulation} sampler steps each" if accumulation > 1 else ""
    return f"global steps {asked} (a trainer's global_step: from 1, across epochs{each})"


def spans(steps: Sequence[int] | Sequence[tuple[int, int]]) -> str:
    """``3, 5-7``: steps, or ``(first, last)`` ranges, as the CLI takes them."""
    ranges = [step if isinstance(step, tuple) else (step, step) for step in steps]
    if ranges and not isinstance(steps[0], tuple):  # single steps: runs of consecutive ones as ranges
        merged: list[tuple[int, int]] = []
        for first, last in sorted(set(ranges)):
            if merged and first == merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], last)
            else:
                merged.append((first, last))
        ranges = merged
    return ", ".join(f"{first}-{last}" if last > first else f"{first}" for first, last in ranges)

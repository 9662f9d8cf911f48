"""What a run's order reads (a mixture, a render spec's training entries, or a plan's packs), for
the commands about orders: the order of an epoch, its steps, and the entries each item holds."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError


class RunSource:
    """What a run's order indexes (``items``: a mixture, a spec's training entries or a plan's
    packs), and the entries each item holds."""

    def __init__(self, store: str, mixture: str, spec: str | None, plan: str | None) -> None:
        if spec is not None and plan is not None:
            raise UsageError("--render and --plan name two different runs; give one")
        self.store, self.kind = store, "plan" if plan else "spec" if spec else "mixture"
        self.items: Any
        if plan is not None:
            from ..pack import RenderedPacks

            self.items = RenderedPacks(store, plan)
        elif spec is not None:
            from ..render import RenderedMixture

            self.items = RenderedMixture(store, mixture, spec=spec)
        else:  # entries only, not their rows: no converter or pyarrow loaded (dataidx steps starts fast)
            from ..read import MixtureEntries

            self.items = MixtureEntries(store, mixture)

    def __enter__(self) -> RunSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.items.close()

    def order(self, epoch: int, seed: int, *, skips: bool) -> Any:
        """The order a run reads in epoch ``epoch`` (a SkippingOrder; without skips, nothing skipped)."""
        import numpy as np  # here, not at the top: `dataidx info` and every other command would load it

        from ..read import SkippingOrder, TrainingOrder

        self.items.set_epoch(epoch)  # past the stored epochs, epoch % epochs, as a training run's set_epoch
        skipped = self.items.skipped_items() if skips else np.empty(0, dtype=np.int64)
        return SkippingOrder(TrainingOrder(len(self.items), seed=seed, epoch=epoch), skipped)

    def steps(self, epoch: int, seed: int, global_batch_size: int, first: int, last: int, tail: str, *,
              skips: bool) -> list[tuple[int, int, int]]:
        """``(step, index, item)`` of global steps ``first .. last`` of a run's epoch ``epoch``."""
        from ..read import step_items

        try:
            return step_items(self.order(epoch, seed, skips=skips), global_batch_size, first, last, tail)
        except IndexError as exc:
            raise UsageError(f"{self.store}: {exc}") from None

    def stored_epochs(self) -> int:
        """The epochs the store holds of what the run read."""
        return len(self.items.epochs if self.kind == "plan" else self.items_reader().epochs)

    def step_chunks(self, seed: int, global_batch_size: int, tail: str, *, skips: bool,
                    chunk: int = 1 << 18) -> Any:
        """Every entry of every step of each stored epoch, as ``(epoch, steps, items, entries)``
        arrays a chunk of order indices at a time."""
        import numpy as np  # here, not at the top: `dataidx info` and every other command would load it

        from ..read import epoch_steps

        for stored in range(self.stored_epochs()):
            read = self.order(stored, seed, skips=skips)
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

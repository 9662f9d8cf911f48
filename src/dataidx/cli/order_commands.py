"""Commands about training orders: which entries a run's steps read (steps)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from .common import echo, echo_json, json_option, table


def _step_range(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    try:
        bounds = int(first), int(last or first)
    except ValueError:
        raise UsageError(f"STEPS is a step or a range like 100-120, not {text!r}") from None
    if bounds[0] < 0 or bounds[1] < bounds[0]:
        raise UsageError(f"STEPS is a step or a range first-last of steps 0 or more, not {text!r}")
    return bounds


@click.command()
@click.argument("store")
@click.argument("steps", metavar="STEP[-STEP]")
@click.option("--mixture", default="default", show_default=True, help="Mixture the run read.")
@click.option("--render", "spec", metavar="SPEC", help="The run read the training entries of this render spec.")
@click.option("--plan", metavar="PLAN", help="The run read the packs of this packing plan (PackedDataset).")
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True, help="Epoch of the run.")
@click.option("--global-batch-size", type=click.IntRange(min=1), required=True, help="Items a step, all ranks.")
@click.option("--seed", type=int, default=0, show_default=True, help="The OrderSampler's seed.")
@click.option("--tail", type=click.Choice(["trim", "pad"]), default="trim", show_default=True,
              help="How the run's sampler ended an epoch.")
@json_option("Print a JSON line per entry.")
def steps(store: str, steps: str, mixture: str, spec: str | None, plan: str | None, epoch: int,
          global_batch_size: int, seed: int, tail: str, as_json: bool) -> None:
    """Which entries (dataset, row, cut) global steps STEP[-STEP] of a run read.

    The run read the mixture (or a render spec's training entries, or a plan's packs) with
    dataidx.OrderSampler(..., global_batch_size, seed): its order is a function of the store,
    the seed and the epoch, so nothing needs to have been logged during training. Steps count
    from the epoch's start at one global batch size. ITEM is what the order indexes: a mixture
    position (also for --render), or a pack of the plan.

    \b
    Example:
        dataidx steps demo.db --global-batch-size 32 --seed 0 1200-1203
        dataidx steps demo.db --render default --global-batch-size 8 --epoch 1 17 --json
        dataidx steps demo.db --plan default --global-batch-size 4 0-1
    """
    from ..read import TrainingOrder, step_items

    if spec is not None and plan is not None:
        raise UsageError("--render and --plan name two different runs; give one")
    first, last = _step_range(steps)
    with _StepSource(store, mixture, spec, plan) as source:
        source.items.set_epoch(epoch)  # past the stored epochs, epoch % epochs, as a training run's set_epoch
        order = TrainingOrder(len(source.items), seed=seed, epoch=epoch)
        try:
            found = step_items(order, global_batch_size, first, last, tail)
        except IndexError as exc:
            raise UsageError(f"{store}: {exc}") from None
        entries = source.entries([item for _, _, item in found])
        rows = [(step, index, item, dataset, row, cut)
                for (step, index, _), of_item in zip(found, entries) for item, dataset, row, cut in of_item]
    if as_json:
        for step, index, item, dataset, row, cut in rows:
            echo_json({"epoch": epoch, "step": step, "index": index, "pack" if plan else "position": item,
                       "dataset": dataset, "row": row, "cut": cut})
        return
    echo(table(("step", "index", "pack" if plan else "position", "dataset", "row", "cut"), rows))


class _StepSource:
    """What a run's order indexes (``items``: a mixture, a spec's training entries or a plan's
    packs), and the entries each item holds."""

    def __init__(self, store: str, mixture: str, spec: str | None, plan: str | None) -> None:
        self.kind = "plan" if plan else "spec" if spec else "mixture"
        self.items: Any
        if plan is not None:
            from ..pack import RenderedPacks

            self.items = RenderedPacks(store, plan)
        elif spec is not None:
            from ..render import RenderedMixture

            self.items = RenderedMixture(store, mixture, spec=spec)
        else:
            from ..read import StoreReader

            self.items = StoreReader(store, mixture)

    def __enter__(self) -> _StepSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.items.close()

    def entries(self, items: list[int]) -> list[list[tuple[int, str, int, int | None]]]:
        """Per item, ``(item, dataset, row, cut)`` of each entry it holds (a pack, several)."""
        reader = self.items.reader if self.kind != "mixture" else self.items
        names = {dataset_id: dataset.name for dataset_id, dataset in reader.datasets.items()}
        if self.kind == "plan":
            found = []
            for pack in items:
                triples = reader.entries_by_id(self.items.member_entries(pack))
                found.append([(pack, names[d], row, cut) for d, row, cut in triples])
            return found
        positions = items if self.kind == "mixture" else self.items.positions_at(items)
        triples = reader.triples(positions)
        return [[(position, names[d], row, cut)] for position, (d, row, cut) in zip(positions, triples)]


COMMANDS = [steps]

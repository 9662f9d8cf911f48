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
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True, help="Epoch of the run.")
@click.option("--global-batch-size", type=click.IntRange(min=1), required=True, help="Items a step, all ranks.")
@click.option("--seed", type=int, default=0, show_default=True, help="The OrderSampler's seed.")
@click.option("--tail", type=click.Choice(["trim", "pad"]), default="trim", show_default=True,
              help="How the run's sampler ended an epoch.")
@json_option("Print a JSON line per entry.")
def steps(store: str, steps: str, mixture: str, spec: str | None, epoch: int, global_batch_size: int, seed: int,
          tail: str, as_json: bool) -> None:
    """Which entries (dataset, row, cut) global steps STEP[-STEP] of a run read.

    The run read the mixture (or a render spec's training entries) with
    dataidx.OrderSampler(..., global_batch_size, seed): its order is a function of the store,
    the seed and the epoch, so nothing needs to have been logged during training. Steps count
    from the epoch's start at one global batch size.

    \b
    Example:
        dataidx steps demo.db --global-batch-size 32 --seed 0 1200-1203
        dataidx steps demo.db --render default --global-batch-size 8 --epoch 1 17 --json
    """
    from ..read import TrainingOrder, step_items

    first, last = _step_range(steps)
    reader, source = _step_reader(store, mixture, spec)
    with source:
        source.set_epoch(epoch)  # past the stored epochs, epoch % epochs, as a training run's set_epoch
        order = TrainingOrder(len(source), seed=seed, epoch=epoch)
        try:
            found = step_items(order, global_batch_size, first, last, tail)
        except IndexError as exc:
            raise UsageError(f"{store}: {exc}") from None
        items = [item for _, _, item in found]
        positions = items if spec is None else source.positions_at(items)
        triples = reader.triples(positions)
        rows = [(step, index, position, reader.datasets[dataset_id].name, row, cut)
                for (step, index, _), position, (dataset_id, row, cut) in zip(found, positions, triples)]
    if as_json:
        for step, index, position, dataset, row, cut in rows:
            echo_json({"epoch": epoch, "step": step, "index": index, "position": position, "dataset": dataset,
                       "row": row, "cut": cut})
        return
    echo(table(("step", "index", "position", "dataset", "row", "cut"), rows))


def _step_reader(store: str, mixture: str, spec: str | None) -> tuple[Any, Any]:
    """The reader of a run's mixture positions, and what its order indexes (the mixture, or the
    spec's training entries)."""
    if spec is None:
        from ..read import StoreReader

        reader = StoreReader(store, mixture)
        return reader, reader
    from ..render import RenderedMixture

    rendered = RenderedMixture(store, mixture, spec=spec)
    return rendered.reader, rendered


COMMANDS = [steps]

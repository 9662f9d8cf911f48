"""Commands about training orders: which entries a run's steps read (steps), skip lists (skip,
unskip), and recording a run's order (order)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from .common import echo, echo_json, json_option, table, trust_option
from .run_source import RunSource, counted


class StepRange(click.ParamType):
    """``STEP`` or ``FIRST-LAST``, parsed where click parses arguments: a malformed one is a usage
    error (exit 2), like any other argument click refuses."""

    name = "STEP[-STEP]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value
        first, _, last = str(value).partition("-")
        try:
            bounds = int(first), int(last or first)
        except ValueError:
            self.fail(f"a step or a range like 100-120, not {value!r}", param, ctx)
        if bounds[0] < 0 or bounds[1] < bounds[0]:
            self.fail(f"a step or a range FIRST-LAST of steps 0 or more, FIRST <= LAST, not {value!r}", param, ctx)
        return bounds


def _numbering_options(func: Any) -> Any:
    """The options that say how a run numbered its steps: its gradient accumulation, and the skip
    lists its order was read without."""
    for option in reversed([
        click.option("--gradient-accumulation-steps", "accumulation", type=click.IntRange(min=1), default=1,
                     show_default=True, help="Sampler steps (forward passes) a trainer's global step took."),
        click.option("--numbered-with", "numbered_with", multiple=True, metavar="LIST",
                     help="A skip list in force when the run started (or last resumed): its steps count without "
                     "the entries it names. Repeatable; 'none' for none."),
    ]):
        func = option(func)
    return func


def _run_options(func: Any) -> Any:
    """The options that name a run's order: what it read, its epoch, batch, seed and tail."""
    for option in reversed([
        click.option("--mixture", default="default", show_default=True, help="Mixture the run read."),
        click.option("--render", "spec", metavar="SPEC", help="The run read this render spec's training entries."),
        click.option("--plan", metavar="PLAN", help="The run read this packing plan's packs."),
        click.option("--epoch", type=click.IntRange(min=0), help="Count STEPs as the sampler does, from 0 within this "
                     "epoch, instead of as a trainer logs them (its global_step: from 1, across epochs)."),
        click.option("--global-batch-size", type=click.IntRange(min=1), help="Items a step, all ranks."),
        click.option("--seed", type=int, default=0, show_default=True, help="The OrderSampler's seed."),
        click.option("--tail", type=click.Choice(["trim", "pad"]), default="trim", show_default=True,
                     help="How the run's sampler ended an epoch."),
        trust_option(),
    ]):
        func = option(func)
    return func


@click.command()
@click.argument("store")
@click.argument("steps", metavar="STEP[-STEP]", type=StepRange())
@_run_options
@_numbering_options
@click.option("--no-skips", is_flag=True, help="The run read the order whole (OrderSampler(skips=False)): the "
              "same as --numbered-with none.")
@json_option("Print a JSON line per entry.")
def steps(store: str, steps: tuple[int, int], mixture: str, spec: str | None, plan: str | None, epoch: int | None,
          global_batch_size: int | None, seed: int, tail: str, accumulation: int, numbered_with: tuple[str, ...],
          no_skips: bool, trust_remote_code: bool, as_json: bool) -> None:
    """Which entries (dataset, row, cut) steps STEP[-STEP] of a run read.

    STEPs are a trainer's global steps as its log shows them (transformers.Trainer's and
    LLaMA-Factory's global_step: the first optimizer step is 1, counted across epochs), or with
    --epoch E the sampler's steps of epoch E, from 0 (the order_steps view's). Each line says
    both, then the mixture position the order read (also for --render; with --plan the pack)
    and its entry. The run read the mixture (or a render spec's training entries, or a plan's
    packs) with dataidx.OrderSampler(..., global_batch_size, seed): its order is a function of
    the store, the seed and the epoch, so nothing needs to have been logged during training.

    \b
    Example:
        dataidx steps demo.db --global-batch-size 32 --seed 0 1201-1204
        dataidx steps demo.db --render default --global-batch-size 8 --epoch 1 17 --json
        dataidx steps demo.db --plan default --global-batch-size 4 --epoch 0 0-1
    """
    if global_batch_size is None:
        raise UsageError("give the run's --global-batch-size")
    with RunSource(store, mixture, spec, plan, trust_remote_code=trust_remote_code) as source:
        lists = source.lists_named(numbered_with, no_skips=no_skips)
        found = source.run_steps([steps], epoch=epoch, seed=seed, global_batch_size=global_batch_size, tail=tail,
                                 accumulation=accumulation, lists=lists)
        entries = source.entries([item for *_, item in found])
        rows = [(e, global_step, step, index, item, dataset, row, cut)
                for (e, global_step, step, index, _), of_item in zip(found, entries)
                for item, dataset, row, cut in of_item]
        in_force = source.skip_lists() if lists is None else lists
    echo(f"{counted([steps], epoch, accumulation)}, numbered with skip lists: {', '.join(in_force) or 'none'}",
         err=True)
    key = "pack" if plan else "position"
    if as_json:
        for e, global_step, step, index, item, dataset, row, cut in rows:
            echo_json({"epoch": e, "global_step": global_step, "step": step, "index": index, key: item,
                       "dataset": dataset, "row": row, "cut": cut})
        return
    echo(table(("epoch", "global step", "step", "index", key, "dataset", "row", "cut"), rows))


@click.command()
@click.argument("store")
@click.argument("name")
@click.option("--why", required=True, help="Why these entries leave the order (kept with the list).")
@click.option("--who", default=None, help="Who asked [default: the user running the command].")
@click.option("--entry", "entries", multiple=True, metavar="DATASET:ROW[:CUT]",
              help="An entry to skip; without CUT, every entry of the row. Repeatable.")
@click.option("--steps", "step_ranges", type=StepRange(), multiple=True, help="Skip the entries of these steps of "
              "a run, counted as for dataidx steps (a trainer's global_step, or with --epoch the sampler's); "
              "repeatable.")
@_run_options
@_numbering_options
def skip(store: str, name: str, why: str, who: str | None, entries: tuple[str, ...],
         step_ranges: tuple[tuple[int, int], ...], mixture: str, spec: str | None, plan: str | None, epoch: int | None,
         global_batch_size: int | None, seed: int, tail: str, trust_remote_code: bool, accumulation: int,
         numbered_with: tuple[str, ...]) -> None:
    """Store skip list NAME: entries every OrderSampler over the mixture leaves out from now on.

    Name the entries (--entry), or the steps of a run whose entries they are (--steps, counted
    as dataidx steps counts them: a trainer's global_step from its log, or with --epoch the
    sampler's). A mixture that already has lists asks which of them the run's steps were
    numbered with (--numbered-with): each list moves the steps after it. Every position of the
    mixture that holds an entry, in every epoch, leaves the order; a plan's packs that hold one
    leave a plan's order. The list keeps who asked, why, and what was asked (dataidx info, the
    skips view). A run resumed after the list was added continues where it stopped; its later
    steps move forward to fill the places of what it skips.

    \b
    Example:
        dataidx skip demo.db spike --steps 5-6 --global-batch-size 4 --why "loss spike at 6"
        dataidx skip demo.db spike-2 --steps 2 --steps 8 --global-batch-size 4 --numbered-with none --why "spikes"
        dataidx skip demo.db bad-rows --entry demo_alpaca:7 --entry demo_sharegpt:3:2 --why "PII"
    """
    from ..store import Orders, rewriting

    if bool(entries) == bool(step_ranges):
        raise UsageError("give the entries to skip with --entry, or a run's steps with --steps (one of them)")
    who = who or _user()
    with RunSource(store, mixture, spec, plan, trust_remote_code=trust_remote_code) as source:
        if step_ranges:
            ids, what = source.steps_entries(step_ranges, epoch=epoch, global_batch_size=global_batch_size, seed=seed,
                                             tail=tail, accumulation=accumulation, numbered_with=numbered_with)
        else:
            ids = [entry for text in entries for entry in _named_entries(source.items_reader(), text)]
            what = "entries " + ", ".join(entries)
        target = source.mixture
    with rewriting(store) as connection:
        stored = Orders(connection).add_skip_list(target, name, ids, who=who, why=why, request=what)
    echo(f"skip list '{name}' of mixture '{target}': {stored.entries} entries ({what})", err=True)


@click.command()
@click.argument("store")
@click.argument("name")
@click.option("--mixture", default="default", show_default=True, help="Mixture the list belongs to.")
def unskip(store: str, name: str, mixture: str) -> None:
    """Remove skip list NAME of a mixture: its entries are read again by orders made from now on.

    \b
    Example:
        dataidx unskip demo.db spike
    """
    from ..store import Orders, rewriting

    with rewriting(store) as connection:
        entries = Orders(connection).remove_skip_list(mixture, name)
    echo(f"removed skip list '{name}' of mixture '{mixture}' ({entries} entries)", err=True)


@click.command()
@click.argument("store")
@click.argument("name")
@_run_options
@click.option("--no-skips", is_flag=True, help="The run reads the order whole, not without what skip lists leave out.")
@click.option("--store-steps", is_flag=True, help="Also store every entry of every step (the order_steps view; a "
              "row an entry, so about 30 bytes an entry an epoch).")
def order(store: str, name: str, mixture: str, spec: str | None, plan: str | None, epoch: int | None,
          global_batch_size: int | None, seed: int, tail: str, trust_remote_code: bool, no_skips: bool,
          store_steps: bool) -> None:
    """Record a run's order as NAME: what it reads, its seed, global batch size and tail, the
    steps of each stored epoch, and the entries each epoch's tail trims (the trimmed view).

    The order itself is computed, not stored (OrderSampler and dataidx steps compute it from the
    same values); this makes the run's choices and what its tails leave out visible in SQL. Skip
    lists added later are not in the recorded trims.

    \b
    Example:
        dataidx order demo.db run-7 --global-batch-size 32 --seed 0
        dataidx query demo.db "SELECT dataset, count(*) FROM trimmed WHERE \"order\" = 'run-7' GROUP BY 1"
    """
    import numpy as np  # here, not at the top: `dataidx info` and every other command would load it

    from ..read import epoch_steps
    from ..store import Orders, RecordedOrder, rewriting

    if global_batch_size is None:
        raise UsageError("give the run's --global-batch-size")
    if epoch is not None:
        raise UsageError("an order is recorded for every stored epoch; leave out --epoch")
    with RunSource(store, mixture, spec, plan, trust_remote_code=trust_remote_code) as source:
        steps, trimmed = [], []
        for stored in range(source.stored_epochs()):
            read = source.order(stored, seed, lists=[] if no_skips else None)
            count = epoch_steps(read.length, global_batch_size, tail)
            steps.append(count)
            left = [] if tail == "pad" else read.at(np.arange(count * global_batch_size, read.length)).tolist()
            trimmed.append(source.entry_ids(left) if left else [])
        recorded = RecordedOrder(name=name, mixture=source.mixture, reads=source.kind, target=spec or plan,
                                 seed=seed, global_batch_size=global_batch_size, tail=tail, skips=not no_skips,
                                 steps=steps, trimmed=trimmed)
        chunks = (source.step_chunks(seed, global_batch_size, tail, lists=[] if no_skips else None) if store_steps
                  else ())
        with rewriting(store) as connection:
            rows = Orders(connection).record(recorded, chunks)
    echo(f"order '{name}': {len(steps)} epochs of {', '.join(map(str, steps))} steps of {global_batch_size}; "
         f"{sum(map(len, trimmed))} entries trimmed" + (f"; {rows} step entries stored" if store_steps else ""),
         err=True)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _named_entries(reader: Any, text: str) -> list[int]:
    """The base entries ``DATASET:ROW[:CUT]`` names (every cut of the row without CUT)."""
    parts = text.split(":")
    try:
        dataset, row, cut = parts[0], int(parts[1]), (int(parts[2]) if len(parts) > 2 else None)
    except (IndexError, ValueError):
        raise UsageError(f"--entry is DATASET:ROW or DATASET:ROW:CUT, not {text!r}") from None
    if len(parts) > 3:
        raise UsageError(f"--entry is DATASET:ROW or DATASET:ROW:CUT, not {text!r}")
    from ..read import row_entries

    found = row_entries(reader.fetch, reader.datasets, reader.path, dataset, row, cut)
    if not found:
        raise UsageError(f"{reader.path}: no entry {text} (dataset, row{', cut' if cut is not None else ''})")
    return found


COMMANDS = [steps, skip, unskip, order]

"""Commands that write a store (build, mix, remove-mixture, migrate) or a config (import-v0); the
render and pack stages' are in :mod:`.render_commands`. Store writers write a copy and rename it
into place, so a failure leaves the store as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..render import RenderRequest
from .common import Interrupted, echo, end_quietly_on_ctrl_c, file_state, mixture_options, shown, table, trust_option
from .render_commands import RENDER_TRUST, render_into


@click.command()
@click.argument("config")
@click.option("-o", "--output", required=True, help="Store to write: a file, or a PostgreSQL URL (replaced only when "
              "the build succeeds).")
@mixture_options
@click.option("--tokenizer", help="Also render every entry with this tokenizer (see dataidx render), as spec "
              "'default'.")
@click.option("--template", help="With --tokenizer: the template (default: the tokenizer's own, else v1's fallback).")
@click.option("--cutoff", type=click.IntRange(1, 2**31 - 1), default=4096, show_default=True, help="With --tokenizer.")
@click.option("--truncation", type=click.Choice(["drop", "right", "left"]), default="drop", show_default=True,
              help="With --tokenizer.")
@click.option("--replace", is_flag=True, help="Build over a store even if it holds mixtures, render specs or packing "
              "plans that the build does not write again (they are deleted).")
@click.option("--eval", "evaluation", metavar="EVAL_YAML", help="Datasets to evaluate on (v1's eval_dataset), "
              "stored as mixture 'eval', which no training mixture draws; none may read a train dataset's file.")
@click.option("--val-size", type=str, help="Hold out a seeded draw of the rows (a fraction in (0, 1), or a number "
              "of rows; every cut of a row goes together) as mixture 'eval', which no training mixture draws.")
@trust_option("With --tokenizer: " + RENDER_TRUST)
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
@click.pass_context
def build(context: click.Context, config: str, output: str, seed: int, sampling: str, tokenizer: str | None,
          template: str | None, cutoff: int, truncation: str, replace: bool, evaluation: str | None,
          val_size: str | None, trust_remote_code: bool, quiet: bool) -> None:
    """Build a store from a LLaMA-Factory v1 dataset YAML (or a data file or folder).

    With --tokenizer, the entries' token lengths and statuses are recorded too, as render spec
    'default' (the same as running dataidx render after the build). A store already at OUTPUT
    is replaced only if it holds nothing the build does not write again, or with --replace.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db --seed 7
        dataidx build data/demo_sft.yaml -o demo.db --tokenizer data/demo_tokenizer --cutoff 256
        dataidx build data/demo_sft.yaml -o demo.db --val-size 0.1
        dataidx build train.yaml --eval eval.yaml -o demo.db
        dataidx build data/demo_sft.yaml -o 'postgresql://me@db/training?schema=sft'
    """
    from .. import index
    from ..store import store_location

    if tokenizer is None:
        given = [f"--{name.replace('_', '-')}" for name in ("template", "cutoff", "truncation", "trust_remote_code")
                 if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for rendering and "
                                   "need --tokenizer (or run dataidx render after the build)")
    progress = None if quiet else (lambda message: echo(message, err=True))
    location = store_location(output)
    before = file_state(location) if isinstance(location, Path) else None
    try:
        summary = index.build(config, output, seed=seed, sampling=sampling, progress=progress, replace=replace,
                              specs=("default",) if tokenizer is not None else (), val_size=val_size,
                              evaluation=evaluation)
        if not quiet:
            _say_built(summary, seed, sampling)
        if tokenizer is None:
            end_quietly_on_ctrl_c()  # the store is written and said: nothing is left to stop
    except KeyboardInterrupt:
        raise Interrupted(_left_by_build(output, location, before)) from None
    if tokenizer is not None:
        render_into(RenderRequest(output, tokenizer, cutoff=cutoff, template=template, truncation=truncation,
                                  trust_remote_code=trust_remote_code), quiet=quiet)


def _say_built(summary: Any, seed: int, sampling: str) -> None:
    """The build's table and last line (of an ``index.BuildSummary``), on stderr."""
    rows = [(d.name, d.rows, d.entries, summary.mixture.datasets.get(d.name, 0), d.drops, d.rejected, d.empty,
             f"{d.seconds:.2f}") for d in summary.datasets]
    echo(table(["dataset", "rows", "entries", "in mixture", "dropped msgs", "rejected rows", "empty rows",
                "seconds"], rows), err=True)
    if summary.mixture.taken_whole:
        echo(f"note: {', '.join(summary.mixture.taken_whole)} have token budgets, which count tokens under a "
                   "render spec: the default mixture holds them whole; draw the budgets with dataidx render, then "
                   "dataidx mix STORE CONFIG --name NAME --spec SPEC", err=True)
    echo(f"wrote {summary.store}: mixture 'default' of {summary.mixture.entries} entries "
         f"(seed {seed}, {sampling}) in {summary.seconds:.2f} s", err=True)
    if summary.evaluation is not None:
        echo(f"held out mixture 'eval' of {summary.evaluation.entries} entries, which no training mixture draws",
             err=True)
    exact = summary.exact
    if exact.copies or exact.same_prompts:
        echo(f"exact duplicates: {exact.copies} entries repeat the messages of another ({exact.groups} groups, "
             f"view exact_duplicates); {exact.same_prompts} entries share their prompt with another (view "
             "same_prompts)", err=True)


def _left_by_build(output: str, location: object, before: tuple[int, int] | None) -> str:
    """What an interrupted build left at ``output``: a store is replaced whole or not at all."""
    if not isinstance(location, Path):  # a schema on a server: replaced in one transaction
        return (f"the build of {shown(output)} was stopped; its schema is replaced in one transaction, so it holds "
                "the store it held or the whole new one (dataidx info says which)")
    after = file_state(location)
    if after is not None and after != before:
        return f"{output} was written before the build was stopped: the store is complete"
    was = f"{output} is as it was" if before is not None else f"there is no store at {output}"
    return f"the build was stopped; nothing was written ({was})"


@click.command()
@click.argument("store")
@click.argument("config")
@click.option("--name", required=True, help="Name of the new mixture.")
@mixture_options
@click.option("--spec", help="Render spec whose lengths count the tokens: needed by CONFIG's tokens/supervised_tokens "
              "budgets, and recorded for dataidx compose.")
@click.option("--epochs", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="Epochs to store, each drawn with its own seed (DataEngine(..., epoch=k) serves one).")
@click.option("--exclude", "excludes", multiple=True, metavar="LIST",
              help="An evidence list (dataidx dedup, decontaminate) whose rows the mixture never draws; repeatable.")
def mix(store: str, config: str, name: str, seed: int, sampling: str, spec: str | None, epochs: int,
        excludes: tuple[str, ...]) -> None:
    """Add a named mixture to STORE from CONFIG's size/weight and token budgets, using the
    stored index alone.

    The sources are not read (they may be gone) and other mixtures are not touched. CONFIG is
    the same YAML; its dataset names must exist in the store. A dataset with `tokens: N` (or
    `supervised_tokens: N`) is drawn until its training entries under --spec add up to N.

    \b
    Example:
        dataidx mix demo.db data/demo_sft.yaml --name seed7 --seed 7
        dataidx mix demo.db data/demo_budgets.yaml --name by_tokens --spec default --epochs 3
        dataidx compose demo.db --mixture by_tokens --spec default --epoch 1
        dataidx mix demo.db data/demo_sft.yaml --name clean --exclude dups --exclude leaks
    """
    from ..index import add_mixture

    summary = add_mixture(store, config, name, seed=seed, sampling=sampling, epochs=epochs, spec=spec,
                          excludes=excludes)
    drawn = f"{epochs} epochs, {summary.entries} entries in all" if epochs > 1 else f"{summary.entries} entries"
    under = f", tokens under spec '{spec}'" if spec else ""
    under += f", without lists {', '.join(excludes)}" if excludes else ""
    echo(f"added mixture '{name}' of {drawn} (seed {seed}, {sampling}{under}) to {shown(store)}", err=True)


@click.command("remove-mixture")
@click.argument("store")
@click.argument("name")
def remove_mixture_command(store: str, name: str) -> None:
    """Remove mixture NAME (its positions and provenance) from STORE.

    \b
    Example:
        dataidx remove-mixture demo.db seed7
    """
    from ..store import remove_mixture

    entries = remove_mixture(store, name)
    echo(f"removed mixture '{name}' ({entries} entries) from {shown(store)}", err=True)


@click.command()
@click.argument("store")
def migrate(store: str) -> None:
    """Upgrade STORE to the newest schema, on a copy renamed into place.

    \b
    Example:
        dataidx migrate old.db
    """
    from ..store import migrate_store

    before, after = migrate_store(store)
    if before == after:
        echo(f"{shown(store)} is already at schema revision {after}", err=True)
    else:
        echo(f"migrated {shown(store)} from schema revision {before} to {after}", err=True)


@click.command("import-v0")
@click.argument("dataset_info")
@click.option("-o", "--output", required=True, help="v1 YAML to write.")
@click.option("--dataset-dir", help="Folder the file names are relative to [default: DATASET_INFO's folder].")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT even if it exists and is not a dataset YAML.")
def import_v0(dataset_info: str, output: str, dataset_dir: str | None, force: bool) -> None:
    """Convert a LLaMA-Factory v0 dataset_info.json into a v1 YAML dataidx builds.

    Datasets v1 cannot express (v0 ranking data, KTO data outside role/content tags, alpaca
    history, custom ShareGPT tags, hub subsets, scripts) are left out, each named with its
    reason here and in the YAML.

    \b
    Example:
        dataidx import-v0 LLaMA-Factory/data/dataset_info.json -o datasets.yaml
        dataidx build datasets.yaml -o all.db
    """
    from ..config import import_dataset_info
    from ..store import check_output

    check_output(output, "yaml", reads=[dataset_info], force=force)
    imported = import_dataset_info(dataset_info, dataset_dir)
    Path(output).write_text(imported.yaml_text(dataset_info), encoding="utf-8")
    for name, reason in imported.left_out.items():
        echo(f"left out '{name}': {reason}", err=True)
    echo(f"wrote {len(imported.datasets)} datasets to {output}"
               + (f"; left out {len(imported.left_out)}" if imported.left_out else ""), err=True)


COMMANDS = [build, mix, remove_mixture_command, migrate, import_v0]


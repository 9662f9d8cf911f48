"""Commands that write a store (build, mix, remove-mixture, migrate, render, pack, remove-spec,
remove-plan) or a config (import-v0). Store writers write a copy and rename it into place, so a
failure leaves the store as it was."""

from __future__ import annotations

from pathlib import Path

import click

from ..spec import DEFAULT_SEED
from .common import ProgressLine, added_tokens_note, echo, mixture_options, render_text, shown, steps_line, table


@click.command()
@click.argument("config")
@click.option("-o", "--output", required=True, help="Store to write: a file, or a PostgreSQL URL (replaced only when "
              "the build succeeds).")
@mixture_options
@click.option("--tokenizer", help="Also render every entry with this tokenizer (see dataidx render), as spec "
              "'default'.")
@click.option("--template", help="With --tokenizer: the template (default: the tokenizer's own).")
@click.option("--cutoff", type=click.IntRange(1, 2**31 - 1), default=4096, show_default=True, help="With --tokenizer.")
@click.option("--truncation", type=click.Choice(["drop", "right", "left"]), default="drop", show_default=True,
              help="With --tokenizer.")
@click.option("--replace", is_flag=True, help="Build over a store even if it holds mixtures, render specs or packing "
              "plans that the build does not write again (they are deleted).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
@click.pass_context
def build(context: click.Context, config: str, output: str, seed: int, sampling: str, tokenizer: str | None,
          template: str | None, cutoff: int, truncation: str, replace: bool, quiet: bool) -> None:
    """Build a store from a LLaMA-Factory v1 dataset YAML (or a data file or folder).

    With --tokenizer, the entries' token lengths and statuses are recorded too, as render spec
    'default' (the same as running dataidx render after the build). A store already at OUTPUT
    is replaced only if it holds nothing the build does not write again, or with --replace.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db --seed 7
        dataidx build data/demo_sft.yaml -o demo.db --tokenizer data/demo_tokenizer --cutoff 256
        dataidx build data/demo_sft.yaml -o 'postgresql://me@db/training?schema=sft'
    """
    from .. import index

    if tokenizer is None:
        given = [f"--{name}" for name in ("template", "cutoff", "truncation")
                 if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for rendering and "
                                   "need --tokenizer (or run dataidx render after the build)")
    progress = None if quiet else (lambda message: echo(message, err=True))
    summary = index.build(config, output, seed=seed, sampling=sampling, progress=progress, replace=replace,
                          specs=("default",) if tokenizer is not None else ())
    if not quiet:
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
    if tokenizer is not None:
        _render(output, tokenizer, template=template, cutoff=cutoff, truncation=truncation, quiet=quiet)


@click.command()
@click.argument("store")
@click.argument("config")
@click.option("--name", required=True, help="Name of the new mixture.")
@mixture_options
@click.option("--spec", help="Render spec whose lengths count the tokens: needed by CONFIG's tokens/supervised_tokens "
              "budgets, and recorded for dataidx compose.")
@click.option("--epochs", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="Epochs to store, each drawn with its own seed (DataEngine(..., epoch=k) serves one).")
def mix(store: str, config: str, name: str, seed: int, sampling: str, spec: str | None, epochs: int) -> None:
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
    """
    from ..index import add_mixture

    summary = add_mixture(store, config, name, seed=seed, sampling=sampling, epochs=epochs, spec=spec)
    drawn = f"{epochs} epochs, {summary.entries} entries in all" if epochs > 1 else f"{summary.entries} entries"
    under = f", tokens under spec '{spec}'" if spec else ""
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


@click.command()
@click.argument("store")
@click.option("--tokenizer", required=True, help="Local model folder (or tokenizer.json) of a fast tokenizer.")
@click.option("--template", help="Built-in template (chatml, qwen, llama3, llama2, internlm2, plain) or a .jinja "
              "file; default: the tokenizer's own chat_template.")
@click.option("--cutoff", required=True, type=click.IntRange(1, 2**31 - 1), help="Most tokens an entry may train on.")
@click.option("--truncation", type=click.Choice(["drop", "right", "left"]), default="drop", show_default=True,
              help="Entries over the cutoff: drop (status too_long), keep the start (right) or the end (left).")
@click.option("--name", default="default", show_default=True, help="Name of the render spec.")
@click.option("--jobs", type=click.IntRange(min=1), help="Processes to render with [default: all cores].")
@click.option("--clock", metavar="DATE", help="For templates that read the date (strftime_now): render at DATE "
              "(YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS) [default: the time the spec was first rendered, or now].")
@click.option("--escape", "escapes", type=click.Choice(["special", "added"]), default="special", show_default=True,
              help="Tokens data text may not produce as ids: special (v1's: added tokens marked special, named "
              "special tokens) or added (every added token, Qwen's <tool_call> and <think> too).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def render(store: str, tokenizer: str, template: str | None, cutoff: int, truncation: str, name: str,
           jobs: int | None, clock: str | None, escapes: str, quiet: bool) -> None:
    """Render every base entry of STORE and record its token lengths and status under a spec.

    Statuses: ok, truncated, too_long, no_supervision, render_error; only ok and truncated train,
    and why the others do not is said once per cause. The spec is fingerprinted (tokenizer,
    template, cutoff, truncation, dataidx version): the same one again is a no-op, a changed one
    recomputes and removes the packing plans made from the old lengths.

    Added tokens not marked special (<tool_call>, <think>) in data text keep their ids, as in v1,
    and are counted per dataset (dataidx info); --escape added breaks them like control tokens.

    \b
    Example:
        dataidx render demo.db --tokenizer models/tiny --template chatml --cutoff 1024
        dataidx render demo.db --tokenizer models/qwen --cutoff 4096 --escape added --name strict
        dataidx query demo.db "SELECT dataset, status, count(*) FROM entry_lengths GROUP BY 1, 2"
    """
    _render(store, tokenizer, template=template, cutoff=cutoff, truncation=truncation, name=name, jobs=jobs,
            quiet=quiet, clock=clock, escapes=escapes)


def _render(store: str, tokenizer: str, *, template: str | None, cutoff: int, truncation: str, quiet: bool,
            name: str = "default", jobs: int | None = None, clock: str | None = None, escapes: str = "special") -> None:
    from ..render import render_store

    summary = render_store(store, tokenizer, cutoff=cutoff, template=template, truncation=truncation, name=name,
                           jobs=jobs, progress=ProgressLine("rendered entries", quiet), clock=clock, escapes=escapes)
    if quiet:
        return
    echo(render_text(name, summary), err=True)
    if summary.reused:
        echo(f"spec '{name}' is up to date in {shown(store)} ({summary.entries} entries, {summary.kept} train)",
             err=True)
        return
    removed = (f"; removed {summary.plans_removed} packing plans made with its old lengths" if summary.plans_removed
               else "")
    echo(f"rendered {summary.entries} entries of {shown(store)} as spec '{name}' ({summary.kept} train) "
               f"in {summary.seconds:.2f} s{removed}", err=True)
    if summary.spec.clock is not None:
        echo(f"the template reads the date: rendered at {summary.spec.clock}, as every later render and reader of "
             f"spec '{name}' will be (--clock sets another)", err=True)
    if summary.added_tokens:
        echo(added_tokens_note(summary.added_tokens), err=True)
    if summary.stale_mixtures:
        names = ", ".join(f"'{mixture}'" for mixture in summary.stale_mixtures)
        names = f"mixture {names} was" if len(summary.stale_mixtures) == 1 else f"mixtures {names} were"
        echo(f"note: {names} drawn by token budgets under the old lengths of spec '{name}' and are "
             f"refused until drawn again: dataidx remove-mixture {shown(store)} NAME, then dataidx mix {shown(store)} "
             f"CONFIG --name NAME --spec {name}", err=True)


@click.command()
@click.argument("store")
@click.option("--spec", required=True, help="Render spec whose lengths to pack (from dataidx render).")
@click.option("--mixture", default="default", show_default=True, help="Mixture whose positions to pack.")
@click.option("--capacity", required=True, type=click.IntRange(1, 2**31 - 1), help="Tokens per pack.")
@click.option("--seed", type=click.IntRange(-(2**63), 2**63 - 1), default=DEFAULT_SEED, show_default=True,
              help="Seed of the pack order.")
@click.option("--name", default="default", show_default=True, help="Name of the plan (replaced if it exists).")
@click.option("--global-batch-size", type=click.IntRange(min=1), metavar="N",
              help="Packs per optimizer step over all ranks: print the steps per epoch it gives.")
def pack(store: str, spec: str, mixture: str, capacity: int, seed: int, name: str,
         global_batch_size: int | None) -> None:
    """Store a best-fit-decreasing packing plan of a mixture's training entries.

    Every position whose entry trains under SPEC goes into exactly one pack of at most
    CAPACITY tokens; the pack order is shuffled with SEED. Views: pack_plans, pack_members.

    \b
    Example:
        dataidx pack demo.db --spec default --capacity 1024 --seed 0 --global-batch-size 8
        dataidx query demo.db "SELECT * FROM pack_plans"
    """
    from ..pack import pack_store

    summary = pack_store(store, spec, capacity=capacity, mixture=mixture, seed=seed, name=name)
    over = f" over {len(summary.epoch_packs)} epochs" if len(summary.epoch_packs) > 1 else ""
    fill = f"{summary.fill:.2%} full" if summary.packs else "empty: no position trains under the spec"
    echo(f"plan '{name}': {summary.entries} entries of mixture '{mixture}' in {summary.packs} packs of {capacity} "
         f"tokens{over}, {fill} (seed {seed}; {summary.left_out} positions left out by their status) "
         f"in {summary.seconds:.2f} s", err=True)
    if len(summary.epoch_packs) > 1:
        echo(f"packs per epoch: {', '.join(map(str, summary.epoch_packs))}", err=True)
    if global_batch_size is not None:
        echo(steps_line(summary.steps(global_batch_size), global_batch_size), err=True)


@click.command("import-v0")
@click.argument("dataset_info")
@click.option("-o", "--output", required=True, help="v1 YAML to write.")
@click.option("--dataset-dir", help="Folder the file names are relative to [default: DATASET_INFO's folder].")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT even if it exists and is not a dataset YAML.")
def import_v0(dataset_info: str, output: str, dataset_dir: str | None, force: bool) -> None:
    """Convert a LLaMA-Factory v0 dataset_info.json into a v1 YAML dataidx builds.

    Datasets v1 cannot express (v0 ranking/KTO data, alpaca history, custom ShareGPT tags,
    hub subsets, scripts) are left out, each named with its reason here and in the YAML.

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


@click.command("remove-spec")
@click.argument("store")
@click.argument("name")
def remove_spec(store: str, name: str) -> None:
    """Remove render spec NAME (its lengths and statuses) and the packing plans made from it.

    \b
    Example:
        dataidx remove-spec demo.db default
    """
    from ..store import remove_render_spec

    plans = remove_render_spec(store, name)
    echo(f"removed render spec '{name}' and {plans} packing plans from {shown(store)}", err=True)


@click.command("remove-plan")
@click.argument("store")
@click.argument("name")
def remove_plan(store: str, name: str) -> None:
    """Remove packing plan NAME (its packs and members) from STORE.

    \b
    Example:
        dataidx remove-plan demo.db default
    """
    from ..store import remove_packing_plan

    remove_packing_plan(store, name)
    echo(f"removed packing plan '{name}' from {shown(store)}", err=True)


COMMANDS = [build, mix, remove_mixture_command, migrate, render, pack, import_v0, remove_spec, remove_plan]

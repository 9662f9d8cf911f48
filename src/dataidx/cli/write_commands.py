"""Commands that write a store: build, mix, remove-mixture, migrate. Each writes a copy and
renames it into place, so a failure leaves the store as it was."""

from __future__ import annotations

import click

from . import cli
from .common import mixture_options, table


@cli.command()
@click.argument("config")
@click.option("-o", "--output", required=True, help="Store file to write (replaced only when the build succeeds).")
@mixture_options
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def build(config: str, output: str, seed: int, sampling: str, quiet: bool) -> None:
    """Build a store from a LLaMA-Factory v1 dataset YAML (or a data file or folder).

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db --seed 7
    """
    from ..build import build as run_build

    progress = None if quiet else (lambda message: click.echo(message, err=True))
    summary = run_build(config, output, seed=seed, sampling=sampling, progress=progress)
    if quiet:
        return
    rows = [(d.name, d.rows, d.entries, summary.mixture.datasets.get(d.name, 0), d.drops, d.rejected)
            for d in summary.datasets]
    click.echo(table(["dataset", "rows", "entries", "in mixture", "dropped msgs", "rejected rows"], rows), err=True)
    click.echo(
        f"wrote {summary.store}: mixture 'default' of {summary.mixture.entries} entries "
        f"(seed {seed}, {sampling}) in {summary.seconds:.2f} s",
        err=True,
    )


@cli.command()
@click.argument("store")
@click.argument("config")
@click.option("--name", required=True, help="Name of the new mixture.")
@mixture_options
def mix(store: str, config: str, name: str, seed: int, sampling: str) -> None:
    """Add a named mixture to STORE from CONFIG's size/weight, using the stored index alone.

    The sources are not read (they may be gone) and other mixtures are not touched. CONFIG is
    the same YAML; its dataset names must exist in the store.

    \b
    Example:
        dataidx mix demo.db data/demo_sft.yaml --name seed7 --seed 7
        dataidx show demo.db 0 --mixture seed7
    """
    from ..mixing import add_mixture

    summary = add_mixture(store, config, name, seed=seed, sampling=sampling)
    click.echo(f"added mixture '{name}' of {summary.entries} entries (seed {seed}, {sampling}) to {store}", err=True)


@cli.command("remove-mixture")
@click.argument("store")
@click.argument("name")
def remove_mixture(store: str, name: str) -> None:
    """Remove mixture NAME (its positions and provenance) from STORE.

    \b
    Example:
        dataidx remove-mixture demo.db seed7
    """
    from ..mixing import remove_mixture as remove

    entries = remove(store, name)
    click.echo(f"removed mixture '{name}' ({entries} entries) from {store}", err=True)


@cli.command()
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
        click.echo(f"{store} is already at schema revision {after}", err=True)
    else:
        click.echo(f"migrated {store} from schema revision {before} to {after}", err=True)

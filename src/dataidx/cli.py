"""The ``dataidx`` command line: thin click wrappers over the library.

Library errors (``DataidxError``) become one line on stderr and exit 1 at a single boundary;
anything else is a bug and keeps its traceback. Results go to stdout, progress to stderr.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from . import __version__
from .errors import DataidxError
from .sampling import DEFAULT_SEED, SAMPLING_MODES

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataidxError as exc:
            raise click.ClickException(str(exc)) from None


def _echo_json(document: Any) -> None:
    click.echo(json.dumps(document, ensure_ascii=False))


def _table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def json_option(help_text: str = "Print one JSON document.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def mixture_options(func: F) -> F:
    """--seed and --sampling, shared by build and mix."""
    func = click.option(
        "--sampling", type=click.Choice(SAMPLING_MODES), default="exact", show_default=True,
        help="exact: distinct when shrinking, whole repeats when growing; replacement: v1's random.choices.",
    )(func)
    return click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the mixture.")(func)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="dataidx")
def cli() -> None:
    """Build a persistent SQLite index of fine-tuning datasets once; read it from torch.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db
        dataidx info demo.db
    """


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
    from .build import build as run_build

    progress = None if quiet else (lambda message: click.echo(message, err=True))
    summary = run_build(config, output, seed=seed, sampling=sampling, progress=progress)
    if quiet:
        return
    rows = [(d.name, d.rows, d.entries, summary.mixture.datasets.get(d.name, 0), d.drops, d.rejected)
            for d in summary.datasets]
    click.echo(_table(["dataset", "rows", "entries", "in mixture", "dropped msgs", "rejected rows"], rows), err=True)
    click.echo(
        f"wrote {summary.store}: mixture 'default' of {summary.mixture.entries} entries "
        f"(seed {seed}, {sampling}) in {summary.seconds:.2f} s",
        err=True,
    )


@cli.command()
@click.argument("store")
@json_option()
def info(store: str, as_json: bool) -> None:
    """Show a store's datasets, entry counts, mixtures, seeds and where each source was.

    \b
    Example:
        dataidx info demo.db --json
    """
    from .info import store_info

    details = store_info(store)
    if as_json:
        _echo_json(details)
        return
    build = details["build"] or {}
    click.echo(f"store {details['store']} (schema {details['schema_revision']}, dataidx {build.get('dataidx_version')})")
    click.echo(f"built {build.get('created_at')} from {build.get('config')} in {build.get('seconds')} s\n")
    click.echo(_table(
        ["dataset", "converter", "rows", "entries", "source", "path"],
        [(d["name"], d["converter"], d["rows"], d["entries"], d["source"], d["path"]) for d in details["datasets"]],
    ))
    for mixture in details["mixtures"]:
        click.echo(f"\nmixture '{mixture['name']}': {mixture['entries']} entries, seed {mixture['seed']}, "
                   f"{mixture['sampling']} sampling, config sha256 {mixture['config_sha256'][:12]}, "
                   f"dataidx {mixture['dataidx_version']}, {mixture['created_at']}")
        click.echo(_table(
            ["dataset", "size", "weight", "base entries", "requested", "entries", "seed"],
            [(name, d["size"], d["weight"], d["base_entries"], d["requested"], d["entries"], d["seed"])
             for name, d in mixture["datasets"].items()],
        ))


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("store")
@click.argument("positions", nargs=-1, required=True, type=int)
@click.option("--mixture", default="default", show_default=True, help="Mixture to read.")
@click.option("--no-verify", is_flag=True, help="Skip the check that the sources did not change.")
def show(store: str, positions: tuple[int, ...], mixture: str, no_verify: bool) -> None:
    """Print entries at POSITIONS (negative counts from the end) as JSON lines.

    Each line is exactly what DataEngine returns for that position.

    \b
    Example:
        dataidx show demo.db 0 5 -1
    """
    from .reader import StoreReader

    reader = StoreReader(store, mixture, verify=not no_verify)
    for position in positions:
        try:
            _echo_json(reader.get(position))
        except IndexError as exc:
            raise DataidxError(str(exc)) from None


@cli.command()
@click.argument("store")
@click.argument("sql")
@json_option("Print one JSON array of objects keyed by column.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
def query(store: str, sql: str, as_json: bool, as_csv: bool) -> None:
    """Run one read-only SQL statement against a store; writes are refused.

    Views: entries(mixture, position, dataset, row, cut) and
    composition(mixture, dataset, entries, distinct_rows, share).

    \b
    Example:
        dataidx query demo.db "SELECT dataset, count(*) AS n FROM entries GROUP BY dataset" --json
    """
    from .query import run_query

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    columns, rows = run_query(store, sql)
    if as_json:
        _echo_json([dict(zip(columns, row)) for row in rows])
    elif as_csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        click.echo(buffer.getvalue(), nl=False)
    else:
        click.echo(_table(columns, rows))


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
    from .mixing import add_mixture

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
    from .mixing import remove_mixture as remove

    entries = remove(store, name)
    click.echo(f"removed mixture '{name}' ({entries} entries) from {store}", err=True)


@cli.command()
@click.argument("store")
@click.option("--mixture", default="default", show_default=True, help="Mixture to describe.")
@json_option("Print one JSON array of objects, one per dataset.")
def compose(store: str, mixture: str, as_json: bool) -> None:
    """Print what a mixture is made of: entries, share, distinct rows and repeats per dataset.

    \b
    Example:
        dataidx compose demo.db --mixture default --json
    """
    from .compose import COLUMNS, composition

    rows = composition(store, mixture)
    if as_json:
        _echo_json(rows)
    else:
        click.echo(_table(list(COLUMNS), [tuple(row[c] for c in COLUMNS) for row in rows]))


@cli.command()
@click.argument("store")
def migrate(store: str) -> None:
    """Upgrade STORE to the newest schema, on a copy renamed into place.

    \b
    Example:
        dataidx migrate old.db
    """
    from .store import migrate_store

    before, after = migrate_store(store)
    if before == after:
        click.echo(f"{store} is already at schema revision {after}", err=True)
    else:
        click.echo(f"migrated {store} from schema revision {before} to {after}", err=True)


@cli.command()
@click.argument("store")
@json_option()
def verify(store: str, as_json: bool) -> None:
    """Check deeply that STORE still matches its sources; exit 1 on any change.

    Rehashes every source file (a byte changed in place is found even with its size and mtime
    put back), checks converter and loader versions, the Arrow data and SQLite's integrity.

    \b
    Example:
        dataidx verify demo.db --json
    """
    from .verify import verify_store

    report = verify_store(store)
    if as_json:
        _echo_json(report)
    else:
        for line in report["integrity"]:
            click.echo(line)
        for name, problems in report["datasets"].items():
            click.echo(f"{name}: " + ("ok" if not problems else "; ".join(problems)))
    if not report["ok"]:
        raise click.exceptions.Exit(1)


def main() -> None:
    cli(prog_name="dataidx")


if __name__ == "__main__":
    sys.exit(main())

"""Commands that read a store (info, show, query, compose) and the YAML cache (cache)."""

from __future__ import annotations

import csv
import io
import sys
import time

import click

from ..errors import UsageError
from .common import (
    echo,
    echo_json,
    json_option,
    merges_said,
    render_specs_text,
    spec_composition_notes,
    table,
    trust_option,
)


@click.command()
@click.argument("store")
@json_option()
def info(store: str, as_json: bool) -> None:
    """Show a store's datasets, entry counts, mixtures, seeds, where each source was, and its
    render specs and packing plans.

    \b
    Example:
        dataidx info demo.db --json
    """
    from ..store import Orders, Specs, open_store, store_info

    details = store_info(store)
    if as_json:
        echo_json(details)
        return
    build = details["build"] or {}
    echo(f"store {details['store']} (schema {details['schema_revision']}, dataidx {build.get('dataidx_version')})")
    echo(f"built {build.get('created_at')} from {build.get('config')} in {build.get('seconds')} s\n")
    echo(table(
        ["dataset", "converter", "rows", "entries", "dropped messages", "rejected rows", "empty rows", "source",
         "path"],
        [(d["name"], d["converter"], d["rows"], d["entries"], d["drops"], d["rejected"],
          "?" if d["empty_rows"] is None else d["empty_rows"], d["source"], d["path"]) for d in details["datasets"]],
    ))
    for d in details["datasets"]:
        if d["media_files"]:
            echo(f"dataset '{d['name']}' names {d['media_files']} media files, {d['media_bytes']:,} bytes "
                 "(view media)")
    for mixture in details["mixtures"]:
        echo(f"\nmixture '{mixture['name']}': {mixture['entries']} entries, seed {mixture['seed']}, "
                   f"{mixture['sampling']} sampling, config sha256 {mixture['config_sha256'][:12]}, "
                   f"dataidx {mixture['dataidx_version']}, {mixture['created_at']}")
        if mixture["held_out_rows"] is not None:
            echo(f"held out for evaluation: {mixture['held_out_rows']} rows (every cut), which no other mixture "
                 "draws")
        if mixture["spec"]:
            echo(f"tokens counted under render spec '{mixture['spec']}'")
        if mixture["stale"]:
            echo(f"refused until drawn again: {mixture['stale']}")
        echo(table(
            ["dataset", "size", "weight", "tokens", "supervised tokens", "base entries", "requested", "entries",
             "seed"],
            [(name, d["size"], d["weight"], d["token_budget"], d["supervised_token_budget"], d["base_entries"],
              d["requested"], d["entries"], d["seed"]) for name, d in mixture["datasets"].items()],
        ))
        rendered = "".join(f", {samples} with render='{spec}'" for spec, samples in mixture["training_samples"].items())
        if len(mixture["epochs"]) > 1:
            echo(f"{len(mixture['epochs'])} epochs of {', '.join(map(str, mixture['epochs']))} entries; "
                       f"samples in all epochs: {mixture['entries']} with DataEngine{rendered}")
        else:
            echo(f"samples per epoch: {mixture['entries']} with DataEngine{rendered}")
        with open_store(store) as handle:
            orders = Orders(handle)
            for line in [*orders.skip_lists_said(mixture["name"]), *orders.said(mixture["name"])]:
                echo(line)
    if details["render_specs"]:
        echo(render_specs_text(details["render_specs"], Specs.REASONING_SAID))
    if details["pack_plans"]:
        echo("\npacking plans (dataidx pack):")
        echo(table(
            ["plan", "spec", "mixture", "capacity", "seed", "packs per epoch", "entries", "fill"],
            [(p["plan"], p["spec"], p["mixture"], p["capacity"], p["seed"], ", ".join(map(str, p["epoch_packs"])),
              p["entries"], f"{p['fill']:.2%}" if p["packs"] else "empty") for p in details["pack_plans"]],
        ))
        for plan in details["pack_plans"]:
            if plan["merge_cuts"] != "no":
                echo(merges_said(plan))


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("store")
@click.argument("positions", nargs=-1, required=True, type=int)
@click.option("--mixture", default="default", show_default=True, help="Mixture to read.")
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True, help="Epoch of the mixture.")
@click.option("--no-verify", is_flag=True, help="Skip the check that the sources did not change.")
@click.option("--render", "spec", metavar="SPEC", help="Render with this spec (from dataidx render) instead.")
@trust_option()
def show(store: str, positions: tuple[int, ...], mixture: str, epoch: int, no_verify: bool, spec: str | None,
         trust_remote_code: bool) -> None:
    """Print entries at POSITIONS (negative counts from the end) as JSON lines.

    Each line is exactly what DataEngine returns for that position. With --render SPEC, the
    entry rendered with that spec: input_ids, labels, loss_weights, attention_mask, and its
    status (entries that do not train are shown too, with the reason).

    \b
    Example:
        dataidx show demo.db 0 5 -1
        dataidx show demo.db 0 --render default
    """
    try:
        if spec is not None:
            from ..render import rendered_position

            for document in rendered_position(store, mixture, spec, list(positions), verify=not no_verify, epoch=epoch,
                                              trust_remote_code=trust_remote_code):
                echo_json(document)
            return
        from ..read import StoreReader

        with StoreReader(store, mixture, verify=not no_verify, epoch=epoch) as reader:
            documents = [reader.get(position) for position in positions]  # an error names the epoch itself
            if len(reader.epochs) > 1:
                echo(f"{reader.serving} (--epoch K for another)", err=True)
        for document in documents:
            echo_json(document)
    except IndexError as exc:
        raise UsageError(str(exc)) from None


@click.command()
@click.argument("store")
@click.argument("sql")
@json_option("Print one JSON array of objects keyed by column.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Value of :NAME in the SQL (repeatable); digits are passed as numbers.")
@click.option("--timeout", type=click.FloatRange(min=0), default=60, show_default=True,
              help="Stop the statement after this many seconds (0: no limit). Ctrl-C stops it too.")
@click.option("--limit", type=click.IntRange(min=1), default=None, show_default="unlimited",
              help="Print at most this many rows, saying so on stderr when there were more.")
def query(store: str, sql: str, as_json: bool, as_csv: bool, params: tuple[str, ...], timeout: float,
          limit: int | None) -> None:
    """Run one read-only SQL statement against a store; writes are refused.

    Views: entries(mixture, position, dataset, row, cut, epoch) and
    composition(mixture, dataset, entries, distinct_rows, share); see docs/sql.md. On
    PostgreSQL the SQL is PostgreSQL's and runs in a read-only transaction.

    \b
    Example:
        dataidx query demo.db "SELECT dataset, count(*) AS n FROM entries GROUP BY dataset" --json
        dataidx query demo.db "SELECT * FROM entries WHERE dataset = :d" --param d=demo_alpaca
    """
    from ..store import run_query

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    columns, rows = run_query(store, sql, dict(_parameter(text) for text in params), timeout=timeout or None,
                              limit=limit)
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if more else rows
    if as_json:
        echo_json([dict(zip(columns, row)) for row in rows])
    elif as_csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        # CSV is data: written as it is to a pipe or file, escaped only where a terminal shows it.
        (echo if sys.stdout.isatty() else click.echo)(buffer.getvalue(), nl=False)
    else:
        echo(table(columns, rows))
    if more:
        echo(f"(stopped at --limit {limit} rows; there are more)", err=True)


def _parameter(text: str) -> tuple[str, int | float | str]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--param")
    for number in (int, float):
        try:
            return name, number(value)
        except ValueError:
            pass
    return name, value


@click.command()
@click.argument("store")
@click.option("--mixture", default="default", show_default=True, help="Mixture to describe.")
@click.option("--epoch", type=click.IntRange(min=0), help="One epoch of the mixture (default: all of them together).")
@click.option("--spec", help="Also the training entries, tokens, supervised tokens and reasoning per dataset "
                             "under this render spec.")
@json_option("Print one JSON array of objects, one per dataset.")
def compose(store: str, mixture: str, epoch: int | None, spec: str | None, as_json: bool) -> None:
    """Print what a mixture is made of: entries, share, distinct rows, repeats and coverage
    (distinct rows seen out of all rows) per dataset, and with --spec the tokens each trains on.

    \b
    Example:
        dataidx compose demo.db --mixture default --json
        dataidx compose demo.db --mixture by_tokens --spec default --epoch 0
    """
    from ..store import (
        Evidence,
        Mixtures,
        Orders,
        Plans,
        composition,
        open_store,
    )

    rows = composition(store, mixture, epoch=epoch, spec=spec)
    with open_store(store) as handle:
        epochs = Mixtures(handle).epoch_count(mixture)
    if epochs > 1 and not as_json:
        echo(Mixtures.serving(mixture, epoch, epochs) if epoch is not None else
             f"mixture '{mixture}', all {epochs} epochs (--epoch K for one)", err=True)
    if as_json:
        echo_json(rows)
        return
    columns = list(Mixtures.COMPOSITION_COLUMNS) + (list(Mixtures.TOKEN_COLUMNS) if spec else [])
    echo(table(columns, [tuple(row[c] for c in columns) for row in rows]))
    if spec:
        echo(spec_composition_notes(store, spec, mixture, rows))
    with open_store(store) as handle:
        for plan in Plans(handle).merging(mixture=mixture, spec=spec) if spec else []:
            echo(merges_said(plan))
        for line in Orders(handle).skip_lists_said(mixture) + Evidence(handle).left_out_said(mixture, spec):
            echo(line)
        held = Mixtures(handle).held_out_row_count()
    if held:
        echo(f"held out for evaluation: {held} rows (every cut), which no other mixture draws"
             if mixture == Mixtures.HELD_OUT else
             f"leaves out the {held} rows held out for evaluation in mixture '{Mixtures.HELD_OUT}'")


@click.command()
@click.option("--clean", "older_than", type=float, metavar="DAYS",
              help="Remove stores not used for DAYS days (0: all of them).")
@json_option("Print the cached stores as one JSON array.")
def cache(older_than: float | None, as_json: bool) -> None:
    """List (or clean) the stores DataEngine("x.yaml") built into the cache folder.

    The folder is $DATAIDX_CACHE, else ~/.cache/dataidx.

    \b
    Example:
        dataidx cache
        dataidx cache --clean 30
    """
    from ..cache import cached_stores, clean_cache
    from ..paths import cache_dir

    if older_than is not None:
        removed = clean_cache(older_than)
        echo(f"removed {len(removed)} cached stores from {cache_dir()}", err=True)
        return
    stores = cached_stores()
    if as_json:
        echo_json([{"store": str(s), "bytes": size, "last_used": used} for s, size, used in stores])
        return
    echo(f"cache folder {cache_dir()}")
    echo(table(["store", "MiB", "days since use"],
               [(s.name, f"{size / 2**20:.1f}", f"{(time.time() - used) / 86400:.1f}") for s, size, used in stores]))


COMMANDS = [info, show, query, compose, cache]

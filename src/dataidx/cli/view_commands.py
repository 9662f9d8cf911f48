"""Commands that show a store to people: report (an HTML page) and serve (Datasette)."""

from __future__ import annotations

import click

from ..spec import DEFAULT_SEED
from .common import ProgressLine, echo, echo_json, json_option, shown, trust_option


@click.command()
@click.argument("store")
@click.option("-o", "--output", default="report.html", show_default=True, help="HTML file to write.")
@click.option("--mixture", default="default", show_default=True, help="Mixture to report on.")
@click.option("--epoch", type=click.IntRange(min=0), help="One epoch of the mixture (default: all of them together).")
@click.option("--spec", help="Render spec whose lengths, statuses and tokens to show (from dataidx render).")
@click.option("--plan", help="Packing plan of the mixture whose fill to show (from dataidx pack).")
@click.option("--samples", default=5, show_default=True, type=click.IntRange(min=0),
              help="Entries to show token by token (rendered with --spec, converted without).")
@click.option("--seed", default=DEFAULT_SEED, show_default=True, type=int, help="Seed of the sampled entries.")
@json_option("Print the report's figures as one JSON document on stdout instead of writing HTML.")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT even if it exists and is not an HTML file.")
@trust_option()
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def report(store: str, output: str, mixture: str, epoch: int | None, spec: str | None, plan: str | None,
           samples: int, seed: int, as_json: bool, force: bool, trust_remote_code: bool, quiet: bool) -> None:
    """Write one self-contained HTML page about a mixture: sources, seeds, budgets, what each
    epoch drew, shares, turns, token lengths by status, supervised tokens, why entries do not
    train, pack fill, rejected rows and sampled entries token by token (hover for id, label,
    weight). Every figure counts the mixture's positions, of all epochs or of --epoch K. It
    opens offline.

    \b
    Example:
        dataidx report demo.db -o report.html --spec default --plan default --samples 5
        dataidx report demo.db --mixture by_tokens --spec default --epoch 1 --json
    """
    from ..store import check_output
    from ..view import report_figures, write_report

    if as_json:
        echo_json(report_figures(store, mixture=mixture, epoch=epoch, spec=spec, plan=plan, samples=samples,
                                 seed=seed))
        return
    check_output(output, "html", store=store, force=force)
    summary = write_report(store, output, mixture=mixture, epoch=epoch, spec=spec, plan=plan, samples=samples,
                           seed=seed, progress=ProgressLine("report steps", quiet), trust_remote_code=trust_remote_code)
    if not quiet:
        echo(f"wrote {summary.path} ({summary.bytes / 1024:,.0f} KiB) about {shown(store)} in "
             f"{summary.seconds:.2f} s", err=True)


@click.command()
@click.argument("store")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(1, 65535), help="Port on 127.0.0.1.")
def serve(store: str, port: int) -> None:
    """Browse STORE in Datasette, read-only, on 127.0.0.1 (needs the extra dataidx[web]).

    Every table and view is described, and the cookbook of docs/sql.md is there as canned
    queries. The database is named after the file: demo.db is /demo.

    \b
    Example:
        dataidx serve demo.db --port 8001     # then http://127.0.0.1:8001/demo/composition
    """
    from ..view import serve_store

    serve_store(store, port, announce=lambda url: echo(f"serving {shown(store)} read-only at {url} "
                                                             "(Ctrl-C stops)", err=True))


COMMANDS = [report, serve]

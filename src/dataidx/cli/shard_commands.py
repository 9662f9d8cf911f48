"""The commands of a render in shards that are not ``dataidx render`` itself: one shard
(``render --shard R/N``, called from there) and ``dataidx merge``, which stores the parts."""

from __future__ import annotations

import click

from ..render import RenderRequest
from .common import ProgressLine, echo
from .render_report import report_render


def render_one_shard(request: RenderRequest, shard: str, parts: str, *, quiet: bool) -> None:
    from ..render import parse_shard, render_shard

    number, shards = parse_shard(shard)
    outcome = render_shard(request, number, shards, parts, progress=ProgressLine(f"shard {number}/{shards}", quiet))
    if not quiet:
        what = "was done already (its manifest checks): skipped" if outcome.skipped else (
            f"rendered in {outcome.seconds:.2f} s")
        echo(f"shard {number}/{shards} (base entries {outcome.first}..{outcome.last}) {what}: {outcome.manifest}",
             err=True)



@click.command()
@click.argument("store")
@click.argument("parts", type=click.Path(file_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr (a warning still shows).")
def merge(store: str, parts: str, quiet: bool) -> None:
    """Store the parts of a render in shards (dataidx render --shard R/N --parts PARTS) as its spec.

    The parts must cover STORE's base entries exactly once, under one spec fingerprint and the
    store's build, each file of the size and digest its manifest says; anything else is refused
    in one line and the store is left as it was. The store is then what a serial dataidx render
    of the same request leaves (rows, summaries, token file), whatever the number of shards.

    \b
    Example:
        # a Slurm array renders the shards, then one merge stores them
        dataidx render demo.db --tokenizer models/tiny --cutoff 1024 --shard $SLURM_ARRAY_TASK_ID/8 --parts parts
        dataidx merge demo.db parts
    """
    from ..render import merge_parts

    summary = merge_parts(store, parts, progress=ProgressLine("merged entries", quiet))
    report_render(store, summary.spec.name, summary, quiet=quiet)


COMMANDS = [merge]

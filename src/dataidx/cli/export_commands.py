"""``dataidx export``: the sample export (a mixture's samples to JSON lines or Parquet), or with
``--format`` the token export (a spec's stored tokens in a trainer's format: Megatron, OLMo-core,
Parquet, packed under ``--plan``)."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..export import FORMATS
from .common import ProgressLine, echo


@click.command()
@click.argument("store")
@click.option("-o", "--output", required=True, help="File to write: .jsonl or .parquet (replaced when complete); with "
              "--format, a folder (appears when complete).")
@click.option("--format", "format_", type=click.Choice(FORMATS), help="Write a spec's stored tokens (dataidx render "
              "--store-tokens) in this format instead of the samples.")
@click.option("--spec", help="Render spec whose stored tokens --format writes [default with --plan: the plan's].")
@click.option("--plan", help="With --format: the packs of this packing plan, in order, one document or row each.")
@click.option("--mixture", help="Mixture to export [default: default; with --plan, the plan's].")
@click.option("--epoch", type=click.IntRange(min=0), default=0, show_default=True, help="Epoch of the mixture.")
@click.option("--no-verify", is_flag=True, help="Skip the check that the sources did not change.")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT even if it exists and is not of its format (a folder: "
              "not empty).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def export(store: str, output: str, format_: str | None, spec: str | None, plan: str | None, mixture: str | None,
           epoch: int, no_verify: bool, force: bool, quiet: bool) -> None:
    """Write a mixture's converted samples, in mixture order, to JSON lines or Parquet; or with
    --format, a render spec's stored tokens for its training entries (or a plan's packs) in a
    trainer's format: megatron (.bin/.idx), olmo (numpy token parts), parquet. See docs/exports.md.

    Each sample or entry is what DataEngine (or PackedDataset) serves for its position; memory
    stays constant whatever the mixture's size.

    \b
    Example:
        dataidx export demo.db -o demo.jsonl
        dataidx export demo.db --mixture seed7 -o seed7.parquet
        dataidx export demo.db --spec default --format megatron -o megatron/
        dataidx export demo.db --plan default --format parquet -o packed/
    """
    if format_ is not None:
        token_export(store, output, format_, spec=spec, plan=plan, mixture=mixture, epoch=epoch, verify=not no_verify,
                     force=force, quiet=quiet)
        return
    if spec is not None or plan is not None:
        raise UsageError(f"--spec and --plan export stored tokens: add --format {', '.join(FORMATS[:-1])} or "
                         f"{FORMATS[-1]}")
    sample_export(store, output, mixture or "default", epoch=epoch, verify=not no_verify, force=force, quiet=quiet)


def sample_export(store: str, output: str, mixture: str, *, epoch: int, verify: bool, force: bool,
                  quiet: bool) -> None:
    """``dataidx export`` without --format, the sample export: write, then say how many."""
    from ..read import export_mixture
    from ..store import Mixtures, check_output, open_store

    check_output(output, "parquet" if output.endswith(".parquet") else "jsonl", store=store, force=force)
    written = export_mixture(store, output, mixture=mixture, epoch=epoch, verify=verify,
                             progress=ProgressLine("exported samples", quiet))
    if not quiet:
        with open_store(store) as handle:
            epochs = Mixtures(handle).epoch_count(mixture)
        echo(f"wrote {written} samples of {Mixtures.serving(mixture, epoch, epochs)} to {output}",
             err=True)


def token_export(store: str, output: str, format_: str, *, spec: str | None, plan: str | None,
                 mixture: str | None, epoch: int, verify: bool, force: bool, quiet: bool) -> None:
    """``dataidx export --format``, the token export: write, then say what was written."""
    from ..export import export_tokens

    summary = export_tokens(store, output, format=format_, spec=spec, plan=plan, mixture=mixture, epoch=epoch,
                            verify=verify, force=force,
                            progress=ProgressLine("exported packs" if plan else "exported entries", quiet))
    if not quiet:
        rate = summary.documents / summary.seconds if summary.seconds else 0.0
        echo(f"wrote {summary.documents} {'packs' if plan else 'entries'} ({summary.tokens} tokens, "
             f"{summary.bytes / 2**20:.1f} MiB, ids {summary.ids_dtype}) of {summary.what} as {format_} to {output} "
             f"in {summary.seconds:.1f} s ({rate:.0f}/s)", err=True)


COMMANDS = [export]

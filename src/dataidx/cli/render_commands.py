"""Commands that write what the render and pack stages make: render specs (render, remove-spec),
their stored tokens, and packing plans (pack, remove-plan). Each writes a copy of the store and
renames it into place, so a failure leaves the store as it was."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ..render import RenderRequest
from ..spec import DEFAULT_SEED
from .common import ProgressLine, echo, merged_and_kept, shown, steps_line, trust_option
from .render_report import report_render
from .shard_commands import render_one_shard

#: --trust-remote-code as render and build say it.
RENDER_TRUST = ("Load a tokenizer that is a class of its folder's own code (auto_map in tokenizer_config.json), "
                "running that code; the spec records it, and its readers need the flag too.")


@click.command()
@click.argument("store")
@click.option("--tokenizer", required=True, help="Local model folder (or tokenizer.json) of a tokenizer (fast, or "
              "slow: labelled by v1's id diff alone).")
@click.option("--template", help="Built-in template (chatml, qwen, llama3, llama2, internlm2, plain, fallback) or a "
              ".jinja file; default: the tokenizer's own chat_template, else v1's fallback ChatML.")
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
@click.option("--store-tokens", is_flag=True, help="Also store every training entry's tokens, labels and loss "
              "weights in a token file of the spec, which readers then serve from with no tokenizer (on a spec "
              "already rendered the same way: add them, keeping its lengths).")
@click.option("--tokens-dir", type=click.Path(file_okay=False), help="Folder of the token file [default: "
              "STORE.tokens beside a store file; for PostgreSQL, the dataidx cache folder].")
@click.option("--replace", is_flag=True, help="Render a spec stored rendered another way again even if packing plans, "
              "stored tokens or token-budget mixtures were made from its lengths (plans and tokens are deleted).")
@trust_option(RENDER_TRUST)
@click.option("--shard", metavar="R/N", help="Render only shard R of N (0 <= R < N: a contiguous range of the base "
              "entries) into a part in --parts, without writing the store; a part already done is skipped. Then "
              "dataidx merge STORE PARTS.")
@click.option("--shards", type=click.IntRange(min=1), metavar="N", help="Render in N shards on --runner, then merge "
              "them: the store is as a serial render leaves it.")
@click.option("--runner", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="With --shards: this machine's processes (--jobs of them), or Ray tasks (a local cluster, or "
              "--address).")
@click.option("--address", help="With --runner ray: the cluster to join (ray.init's address) [default: start a local "
              "one].")
@click.option("--parts", type=click.Path(file_okay=False), help="Folder of the shards' parts (shared storage for "
              "machines) [with --shards, default: STORE.parts beside a store file, removed once merged].")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr (a warning still shows).")
def render(store: str, tokenizer: str, template: str | None, cutoff: int, truncation: str, name: str,
           jobs: int | None, clock: str | None, escapes: str, store_tokens: bool, tokens_dir: str | None,
           replace: bool, trust_remote_code: bool, shard: str | None, shards: int | None, runner: str,
           address: str | None, parts: str | None, quiet: bool) -> None:
    """Render every base entry of STORE and record its token lengths and status under a spec.

    Statuses: ok, truncated, too_long, no_supervision, render_error; only ok and truncated train,
    and why the others do not is said once per cause (and loudly when most entries do not). The
    spec is fingerprinted (tokenizer, template, cutoff, truncation, dataidx version): the same one
    again is a no-op; a changed one recomputes the lengths, and if packing plans, stored tokens or
    token-budget mixtures were made from the old ones, is refused, naming them, unless --replace.

    Added tokens not marked special (<tool_call>, <think>) in data text keep their ids, as in v1,
    and are counted per dataset (dataidx info); --escape added breaks them like control tokens.

    A slow tokenizer (no character offsets) is labelled by v1's prompt/whole id diff alone:
    where v1 refuses an entry, so does dataidx. A tokenizer whose folder holds its own class
    (auto_map) runs that code, so it needs --trust-remote-code; the spec records it.

    \b
    Example:
        dataidx render demo.db --tokenizer models/tiny --template chatml --cutoff 1024
        dataidx render demo.db --tokenizer models/qwen --cutoff 4096 --escape added --name strict
        dataidx render demo.db --tokenizer models/tiny --template chatml --cutoff 1024 --store-tokens
        dataidx render demo.db --tokenizer models/tiny --template chatml --cutoff 2048 --replace
        dataidx render demo.db --tokenizer models/custom --cutoff 4096 --trust-remote-code --name custom
        dataidx query demo.db "SELECT dataset, status, count(*) FROM entry_lengths GROUP BY 1, 2"
        dataidx render demo.db --tokenizer models/tiny --cutoff 1024 --shards 8 --runner ray
        dataidx render demo.db --tokenizer models/tiny --cutoff 1024 --shard 3/8 --parts /shared/parts
        dataidx merge demo.db /shared/parts
    """
    request = RenderRequest(store, tokenizer, cutoff=cutoff, template=template, truncation=truncation, name=name,
                            jobs=jobs, clock=clock, escapes=escapes, store_tokens=store_tokens,
                            tokens_dir=tokens_dir, replace=replace, trust_remote_code=trust_remote_code)
    if shard is not None:
        if shards is not None or parts is None:
            raise UsageError("--shard R/N renders one shard into --parts DIR (and takes no --shards)")
        render_one_shard(request, shard, parts, quiet=quiet)
    elif shards is not None:
        render_into(request, quiet=quiet, sharded=(shards, runner, address, parts))
    else:
        if address is not None or parts is not None:
            raise UsageError("--parts and --address go with --shards (or --parts with --shard)")
        render_into(request, quiet=quiet)


def render_into(request: RenderRequest, *, quiet: bool,
                sharded: tuple[int, str, str | None, str | None] | None = None) -> None:
    """``dataidx render`` (and ``build --tokenizer``): render (``sharded``: in shards on a
    runner, then merged), then say what was stored, and last, even with ``quiet``, a warning when
    most entries will not train."""
    from ..render import render_store

    if sharded is None:
        summary = render_store(request, progress=ProgressLine("rendered entries", quiet))
    else:
        from ..render import run_shards

        shards, runner, address, parts = sharded
        summary = run_shards(request, shards, runner=runner, address=address, parts=parts,
                             progress=ProgressLine(f"rendered entries ({shards} shards)", quiet),
                             merged=ProgressLine("merged entries", quiet))
    report_render(str(request.store), request.name, summary, quiet=quiet)


@click.command()
@click.argument("store")
@click.option("--spec", required=True, help="Render spec whose lengths to pack (from dataidx render).")
@click.option("--mixture", default="default", show_default=True, help="Mixture whose positions to pack.")
@click.option("--capacity", type=click.IntRange(1, 2**31 - 1), default=None,
              help="Tokens per pack (best-fit; v1's strategies take --micro-batch-size).")
@click.option("--seed", type=click.IntRange(-(2**63), 2**63 - 1), default=DEFAULT_SEED, show_default=True,
              help="Seed of the pack order.")
@click.option("--name", default="default", show_default=True, help="Name of the plan (replaced if it exists).")
@click.option("--global-batch-size", type=click.IntRange(min=1), metavar="N",
              help="Packs per optimizer step over all ranks: print the steps per epoch it gives.")
@click.option("--merge-cuts", is_flag=True,
              help="Train a conversation whose cuts' stored tokens are each a prefix of the next as one sequence.")
@click.option("--trees", is_flag=True,
              help="With --merge-cuts: train the other conversations as prefix trees (needs the batch's tree mask).")
@click.option("--strategy", type=click.Choice(["best-fit", "dynamic", "dynamic-padding-free"]), default="best-fit",
              show_default=True, help="best-fit packs, or LLaMA-Factory v1's dynamic batching (padded micro-batches) "
              "or dynamic padding-free (packed ones) over a seeded stream.")
@click.option("--micro-batch-size", type=int, default=None,
              help="v1's micro_batch_size: a dynamic micro-batch holds it times the spec's cutoff tokens.")
@click.option("--world-size", type=int, default=None, help="Ranks training: the plan records each step's cost per "
              "rank (view plan_balance).")
@click.option("--micro-batches", type=int, default=None, help="Packs a rank takes a step (default 1).")
@click.option("--balance", type=click.Choice(["tokens", "compute"]), default="tokens", show_default=True,
              help="compute: order packs so every rank's share of a step costs about the same.")
@click.option("--cost", default=None, metavar="A,B", help="A sequence of L tokens costs A*L + B*L^2 (default: from "
              "--cost-config, or the config.json beside the spec's tokenizer).")
@click.option("--cost-config", default=None, metavar="PATH", help="A model's config.json (or its folder) to cost by.")
def pack(store: str, spec: str, mixture: str, capacity: int | None, seed: int, name: str,
         global_batch_size: int | None, merge_cuts: bool, trees: bool, strategy: str, micro_batch_size: int | None,
         world_size: int | None, micro_batches: int | None, balance: str, cost: str | None,
         cost_config: str | None) -> None:
    """Store a best-fit-decreasing packing plan of a mixture's training entries.

    Every position whose entry trains under SPEC goes into exactly one pack of at most
    CAPACITY tokens; the pack order is shuffled with SEED. Views: pack_plans, pack_members.

    --merge-cuts checks, with the spec's stored tokens, each conversation whose cuts are all in
    the epoch once: where every cut is a prefix of the next, its cuts train as one sequence
    (every cut's supervised tokens labelled, the same loss); with --trees the others train as
    prefix trees. The rest stay cuts; the view cut_merges says how many and why.

    --strategy dynamic or dynamic-padding-free cuts LLaMA-Factory v1's micro-batches instead
    (plugins/trainer_plugins/batching.py): from the positions in a seeded order, each taking
    samples while --micro-batch-size times the spec's cutoff holds them, padded (dynamic: count
    times the longest) or packed (their tokens); serve a dynamic plan with Collator(packs="rows").

    --world-size W (and --micro-batches M) plans for W ranks taking M packs a step; with
    --balance compute the packs are ordered so that each step's cost per rank, A*L + B*L^2 over
    its sequences, is about the mean. Read such a plan with OrderSampler(world_size=W,
    global_batch_size=W*M, seed=None).

    \b
    Example:
        dataidx pack demo.db --spec default --capacity 1024 --seed 0 --global-batch-size 8
        dataidx query demo.db "SELECT * FROM pack_plans"
    """
    from ..pack import pack_store

    if trees and not merge_cuts:
        raise click.UsageError("--trees merges cuts into prefix trees: give --merge-cuts with it")
    summary = pack_store(store, spec, capacity=capacity, mixture=mixture, seed=seed, name=name,
                         merge_cuts=("trees" if trees else "chains") if merge_cuts else "no", world_size=world_size,
                         micro_batches=micro_batches, balance=balance, cost=cost, cost_config=cost_config,
                         strategy=strategy, micro_batch_size=micro_batch_size)
    over = f" over {len(summary.epoch_packs)} epochs" if len(summary.epoch_packs) > 1 else ""
    fill = f"{summary.fill:.2%} full" if summary.packs else "empty: no position trains under the spec"
    what = "packs" if strategy == "best-fit" else f"{strategy} micro-batches"
    echo(f"plan '{name}': {summary.entries} entries of mixture '{mixture}' in {summary.packs} {what} of "
         f"{summary.capacity} tokens{over}, {fill} (seed {seed}; {summary.left_out} positions left out by their "
         f"status) in {summary.seconds:.2f} s", err=True)
    if len(summary.epoch_packs) > 1:
        echo(f"packs per epoch: {', '.join(map(str, summary.epoch_packs))}", err=True)
    if merge_cuts:
        for line in merge_lines(summary):
            echo(line, err=True)
    if summary.topology is not None:
        echo(balance_line(summary), err=True)
    if global_batch_size is not None:
        echo(steps_line(summary.steps(global_batch_size), global_batch_size), err=True)
        if merge_cuts:
            echo("without --merge-cuts: " + steps_line(summary.steps(global_batch_size, unmerged=True),
                                                       global_batch_size), err=True)


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


COMMANDS = [render, pack, remove_spec, remove_plan]


def merge_lines(summary: Any) -> list[str]:
    """What ``--merge-cuts`` did, in a few lines: conversations merged, kept as cuts and why, tokens."""
    merged, kept = merged_and_kept({outcome: values[0] for outcome, values in summary.merges.items()})
    before, after = summary.unmerged_tokens, summary.tokens
    ratio = f" ({before / after:.2f}x fewer)" if after else ""
    return [f"merged cuts: {merged}; tokens forwarded {before:,} -> {after:,}{ratio}; "
            f"packs {sum(summary.unmerged_packs):,} -> {summary.packs:,}",
            *([f"conversations kept as cuts: {kept}"] if kept else [])]


def balance_line(summary: Any) -> str:
    """What a plan for a topology promises (a ``pack.PackSummary``): its worst and mean step's
    costliest rank over the mean, beside the token-balanced order of the same packs."""
    topology = summary.topology
    (worst, mean), (token_worst, token_mean) = summary.balance.overall()
    return (f"{topology.world_size} ranks x {topology.micro_batches} packs a step, balanced by {topology.balance} "
            f"(cost {topology.cost.a:.4g}*L + {topology.cost.b:.4g}*L^2): costliest rank / mean, worst step "
            f"{worst:.3f}, mean {mean:.3f}; the token-balanced order of these packs: worst {token_worst:.3f}, "
            f"mean {token_mean:.3f} (view plan_balance)")

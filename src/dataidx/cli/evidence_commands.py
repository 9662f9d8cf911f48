"""Evidence about data: ``dataidx dedup`` (near-duplicate rows), and ``dataidx evidence``, which
lists the runs a store holds and removes one (its entries then count everywhere again)."""

from __future__ import annotations

import click

from .common import ProgressLine, echo


@click.command()
@click.argument("store")
@click.option("--name", required=True, help="The list's name (what --exclude and the duplicates view call it).")
@click.option("--threshold", type=float, default=0.8, show_default=True,
              help="Jaccard of two rows' word 5-grams, verified exactly, from which they are duplicates.")
@click.option("--spec", default=None, help="Compare the token ids this render spec stored (dataidx render "
              "--store-tokens), in 5-grams, instead of words.")
@click.option("--jobs", type=int, default=None, help="Processes reading rows (default: all cores).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def dedup(store: str, name: str, threshold: float, spec: str | None, jobs: int | None, quiet: bool) -> None:
    """Find near-duplicate rows of STORE and store them as list NAME, deleting nothing.

    Every row's word 5-grams are MinHashed (rensa, 112 permutations) and banded (16 bands of 7
    rows); every candidate pair is verified by the exact Jaccard of the two rows, whole and in
    their supervised text, before it is recorded. Each cluster keeps its first row (the YAML's
    dataset order, then row order); the others' entries are the list, each with its
    representative and Jaccard (the duplicates view).

    With --spec, a row is the token ids the spec stored for it (its last entry's), in 5-grams:
    what training sees, in any script.

    \b
    Example:
        dataidx dedup demo.db --name dups
        dataidx query demo.db "SELECT * FROM duplicates WHERE run = 'dups' LIMIT 5"
    """
    from ..dedup import find_duplicates

    run = find_duplicates(store, name, threshold=threshold, spec=spec, jobs=jobs,
                          progress=ProgressLine("rows read", quiet))
    if not quiet:
        params = run.params
        echo(f"list '{run.name}': {params['flagged_rows']:,} duplicate rows of {params['rows']:,} ({run.entries:,} "
             f"entries), {params['candidates']:,} candidate pairs verified, in {run.seconds:.1f} s; the "
             "duplicates view shows each with its representative", err=True)


@click.command()
@click.argument("store")
@click.option("--eval", "evals", multiple=True, required=True, metavar="NAME=FILE[:FIELD]",
              help="An eval set: a local .jsonl, .json or .parquet file, and the field of its items.")
@click.option("--name", required=True, help="The list's name (what --exclude and the contamination view call it).")
@click.option("--n", "ngram", type=int, default=8, show_default=True, help="Words per n-gram looked up.")
@click.option("--threshold", type=float, default=0.5, show_default=True,
              help="The least share of an item's words, as one span, that makes a leak.")
@click.option("--jobs", type=int, default=None, help="Processes reading rows (default: all cores).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def decontaminate(store: str, evals: tuple[str, ...], name: str, ngram: int, threshold: float, jobs: int | None,
                  quiet: bool) -> None:
    """Find the rows of STORE that hold items of eval sets, and store them as list NAME.

    A row's text (prompt and answer) is looked up in each eval set's word n-grams; an item's
    score is the longest span of its words found, over its words (n-grams of 3 or more items of
    a set are its template, not a leak). Every entry of a row with an item scoring THRESHOLD or
    more is listed with the item, score and span (the contamination view); nothing is deleted.

    \b
    Example:
        dataidx decontaminate demo.db --eval mmlu=evals/mmlu.jsonl:question --name leaks
        dataidx query demo.db "SELECT dataset, row, eval_set, item, score, span FROM contamination"
    """
    from ..dedup import find_leaks, parse_eval, read_eval

    eval_sets = [read_eval(*parse_eval(text)) for text in evals]
    run = find_leaks(store, name, eval_sets, n=ngram, threshold=threshold, jobs=jobs,
                     progress=ProgressLine("rows read", quiet))
    if not quiet:
        echo(f"list '{run.name}': {run.params['rows']:,} rows ({run.entries:,} entries) hold an eval item at "
             f"{threshold} or more, in {run.seconds:.1f} s; the contamination view shows each with its span", err=True)


@click.command()
@click.argument("store")
@click.option("--remove", "removed", metavar="NAME", help="Remove list NAME: its entries count everywhere again.")
def evidence(store: str, removed: str | None) -> None:
    """List the evidence lists of STORE (dataidx dedup, decontaminate), or remove one.

    \b
    Example:
        dataidx evidence demo.db
        dataidx evidence demo.db --remove dups
    """
    from ..store import Evidence, open_store, rewriting

    if removed is not None:
        with rewriting(store) as connection:
            run = Evidence(connection).remove(removed)
        echo(f"removed list '{run.name}' ({run.kind}, {run.entries:,} entries)", err=True)
        return
    with open_store(store) as handle:
        for run in Evidence(handle).runs():
            echo(f"{run.name}: {run.kind}, {run.entries:,} entries, {run.created_at}, {run.seconds:.1f} s; "
                 f"{', '.join(f'{key} {value}' for key, value in sorted(run.params.items()))}")


COMMANDS = [dedup, decontaminate, evidence]

"""What a render stored, said once it is done: by ``dataidx render`` (and ``build --tokenizer``)
and by ``dataidx merge``, which stores a render's shards."""

from __future__ import annotations

from typing import Any

from ..render import cause_advice, describe_cause
from .common import added_tokens_note, echo, render_text, shown


def report_render(store: str, name: str, summary: Any, *, quiet: bool) -> None:
    """What a render (or a merge) stored, then the warning when most entries will not train."""
    if not quiet:
        _said(store, name, summary)
    if summary.kept * 2 < summary.entries:
        echo(few_train_warning(name, summary), err=True)


def _said(store: str, name: str, summary: Any) -> None:
    """What a render stored, in a few lines."""
    if summary.tokens_added:
        echo(f"stored the tokens of spec '{name}' in {shown(store)}, its lengths unchanged: "
             f"{tokens_line(summary)}", err=True)
        return
    echo(render_text(name, summary), err=True)
    if summary.tokens is not None and not summary.reused:
        echo(f"stored tokens: {tokens_line(summary)}", err=True)
    if summary.reused:
        echo(f"spec '{name}' is up to date in {shown(store)} ({summary.entries} entries, {summary.kept} train)",
             err=True)
        return
    plans = summary.plans_removed
    gone = [f"{plans} packing plan{'s' if plans != 1 else ''} made with its old lengths"] if plans else []
    gone += [f"its stored tokens ({summary.tokens_replaced})"] if summary.tokens_replaced else []
    removed = f"; removed {' and '.join(gone)}" if gone else ""
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


def few_train_warning(name: str, summary: Any) -> str:
    """The warning of a render where most entries will not train (said last, even with -q): how
    many will, and the commonest reason the others will not, with what to change."""
    spec = summary.spec
    line = (f"warning: only {summary.kept:,} of {summary.entries:,} entries will train under spec '{name}' "
            f"(--cutoff {spec.cutoff}, --truncation {spec.truncation})")
    if summary.causes:
        cause, entries = max(((found[0], found[1]) for found in summary.causes), key=lambda found: found[1])
        meaning = describe_cause(cause)
        advice = ("raise --cutoff, or keep their start with --truncation right" if meaning.whose == "cutoff"
                  else cause_advice(cause) or "see why above (dataidx info says it again)")
        line += f"; the commonest reason: {meaning.words} ({entries:,} entries): {advice}"
    return line


def tokens_line(summary: Any) -> str:
    """The token file of a render summary, in one line."""
    tokens = summary.tokens
    return (f"{tokens.tokens:,} tokens of {tokens.entries:,} entries in {tokens.file} "
            f"({tokens.bytes / max(tokens.tokens, 1):.2f} bytes per token, {tokens.word_bytes * 8}-bit words)")

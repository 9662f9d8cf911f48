"""Pieces every command shares: output helpers, a progress line, option factories."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from ..errors import hide_passwords
from ..render import cause_advice, describe_cause
from ..spec import DEFAULT_SEED, SAMPLING_MODES
from ..store import Mixtures, Specs, open_store

F = TypeVar("F", bound=Callable[..., Any])


class ProgressLine:
    """Progress of a long step on stderr: one line redrawn in place on a terminal, a line every
    few seconds otherwise (logs stay readable), and a last line when done: a
    :data:`~dataidx.progress.CountProgress`, called with ``(done, total)``."""

    def __init__(self, label: str, quiet: bool = False, every: float = 2.0) -> None:
        self.label, self.quiet, self.every = label, quiet, every
        self.started = self.shown = time.perf_counter()
        self.live = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        finished = done >= total
        if self.quiet or not (finished or self.live or now - self.shown >= self.every):
            return
        self.shown = now
        rate = done / max(now - self.started, 1e-9)
        share = f" ({done / total:.0%})" if total else ""
        line = f"{self.label} {done:,}/{total:,}{share}, {rate:,.0f}/s"
        if not finished and done and total:  # what is left at the rate so far
            line += f", ETA {(total - done) / max(rate, 1e-9):,.0f} s"
        if self.live:
            click.echo(f"\r{line}\x1b[K" + ("\n" if finished else ""), err=True, nl=False)
        else:
            click.echo(line, err=True)


class Interrupted(click.ClickException):
    """Ctrl-C, said in one line with what it left behind, and exit 130 (128 + SIGINT) as a shell
    reports it: click's own "Aborted!" says neither."""

    exit_code = 130

    def show(self, file: Any = None) -> None:
        click.echo(f"Interrupted: {printable(self.format_message())}", err=True)


def interruptible_until_done(signum: int, frame: Any) -> None:
    """The ``dataidx`` script's SIGINT handler while its command runs: a KeyboardInterrupt, as
    Python's own raises (commands say what it left); it marks the script, which tests' in-process
    runs are not, for :func:`end_quietly_on_ctrl_c`."""
    raise KeyboardInterrupt


def end_quietly_on_ctrl_c() -> None:
    """Once the script's command is over and has said so, Ctrl-C ends the process as it ends any
    program, printing nothing (130 in a shell). A KeyboardInterrupt then printed click's
    "Aborted!" over a finished build (exit 1) or, in an atexit handler, a traceback (exit 0)."""
    if signal.getsignal(signal.SIGINT) is interruptible_until_done:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def file_state(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """A store file's inode and mtime, None when there is none: a write renames a whole new file
    into place, so a state that changed says a write landed."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def shown(store: str) -> str:
    """A store as messages print it: a database URL without its password."""
    return hide_passwords(str(store))


#: Characters a terminal acts on rather than shows: C0 and C1 controls (colours, titles,
#: clearing the screen), DEL, and the bidirectional overrides that reorder what is shown.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on escaped (``\\x1b``, ``\\u202e``):
    names and values from a config or a store can colour, retitle or clear no one's screen.
    With ``lines``, newlines are kept (a table's rows), otherwise escaped too (one line)."""
    if lines:
        return "\n".join(_UNSHOWABLE.sub(_escaped, line) for line in text.split("\n"))
    return _UNSHOWABLE.sub(_escaped, text)


def echo(message: Any = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of text that may hold names and values from configs and stores: shown
    with control characters escaped, its lines kept."""
    click.echo(printable(str(message), lines=True), err=err, nl=nl)


def _json_text(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def echo_json(document: Any) -> None:
    # default=str: a server's dates, times and the like print as text rather than fail. JSON
    # escapes C0 controls itself; C1 and bidi controls become \u escapes, the same JSON.
    click.echo(_UNSHOWABLE.sub(_json_text, json.dumps(document, ensure_ascii=False, default=str)))


def table(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> str:
    """A plain aligned text table, for people; ``--json`` is for programs."""
    cells = [[("" if v is None else printable(str(v))) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def json_option(help_text: str = "Print one JSON document.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def trust_option(help_text: str = "Load a spec's tokenizer that is a class of its folder's own code (a spec "
                 "rendered with --trust-remote-code), running that code.") -> Callable[[F], F]:
    """--trust-remote-code: off by default, so a folder's (or a crafted store's) code never runs unasked."""
    return click.option("--trust-remote-code", is_flag=True, help=help_text)


def mixture_options(func: F) -> F:
    """--seed and --sampling, shared by build and mix."""
    func = click.option(
        "--sampling", type=click.Choice(SAMPLING_MODES), default="exact", show_default=True,
        help="exact: distinct when shrinking, whole repeats when growing; replacement: v1's random.choices.",
    )(func)
    return click.option("--seed", type=click.IntRange(-(2**63), 2**63 - 1), default=DEFAULT_SEED, show_default=True,
                        help="Seed of the mixture.")(func)


def steps_line(steps: list[tuple[int, int]], global_batch_size: int) -> str:
    """``3 steps per epoch at a global batch size of 4 packs...``: one epoch's steps, or each
    epoch's when they differ, and the packs the loader drops at the end of an epoch."""
    counts = {count for count, _ in steps}
    if len(counts) == 1:
        count = counts.pop()
        said = f"{count} step{'s' if count != 1 else ''} per epoch"
    else:
        said = f"steps per epoch {', '.join(str(count) for count, _ in steps)} (epochs 0-{len(steps) - 1})"
    rests = [rest for _, rest in steps]
    if not any(rests):
        dropped = ""
    elif len(steps) == 1:
        dropped = ("; the last pack does not fill a step and is dropped (drop_last)" if rests[0] == 1 else
                   f"; the last {rests[0]} packs do not fill a step and are dropped (drop_last)")
    else:
        dropped = ("; the last packs of each epoch that do not fill a step are dropped (drop_last): "
                   f"{', '.join(map(str, rests))}")
    return f"{said} at a global batch size of {global_batch_size} packs{dropped}"


def added_tokens_note(uses: list[tuple[str, str, int]], listed: int = 5) -> str:
    """What ``dataidx render`` says of ``(dataset, token, entries)`` uses of plain added tokens."""
    found = ", ".join(f"{token} in {dataset} ({entries} entr{'y' if entries == 1 else 'ies'})"
                      for dataset, token, entries in uses[:listed])
    more = f" and {len(uses) - listed} more" if len(uses) > listed else ""
    return (f"note: data text holds added tokens that are not special: {found}{more}; trained as their ids, as "
            "LLaMA-Factory v1 does (dataidx info lists them; --escape added breaks them)")


def added_tokens_table(specs: list[dict[str, Any]]) -> str:
    """What ``dataidx info`` says of the plain added tokens in data text, per spec and dataset."""
    return ("\nadded tokens that are not special, in data text: trained as their ids, as LLaMA-Factory v1 does "
            "(dataidx render --escape added breaks them)\n"
            + table(["spec", "dataset", "added token", "entries"],
                    [(s["name"], u["dataset"], u["token"], u["entries"]) for s in specs for u in s["added_tokens"]]))


def causes_note(spec: str, causes: Sequence[tuple[str, int, str, int, int | None, str | None]], *,
                within: str | None = None) -> str:
    """What ``dataidx render`` and ``info`` say of why entries of a spec do not train: per cause
    ``(cause, entries, dataset, row, cut, detail)``, its count and words, the first entry with its
    detail, and for a template's cause what to pass instead ("" when every entry trains);
    ``within``: the mixture whose datasets' entries they are."""
    if not causes:
        return ""
    total = sum(cause[1] for cause in causes)
    of = f"spec '{spec}'" + (f" in the datasets of {within}" if within else "")
    lines = [f"why {total:,} entr{'y' if total == 1 else 'ies'} of {of} do not train:"]
    for cause, entries, dataset, row, cut, detail in causes:
        lines.append(f"  {entries:>9,}  {describe_cause(cause).words}")
        example = f"{dataset} row {row}" + (f" cut {cut}" if cut is not None else "")
        lines.append(f"  {'':>9}  e.g. {example}" + (f": {detail}" if detail else ""))
        if (advice := cause_advice(cause)) is not None:
            lines.append(f"  {'':>9}  {advice}")
    return "\n".join(lines)


def render_text(spec: str, summary: Any) -> str:
    """What ``dataidx render`` says first of a render (a ``RenderSummary``): entries per dataset and
    status, why those that do not train do not, and what became of reasoning, worst first."""
    found = [f"{summary.reasoning[status]:,} {status}" for status in Specs.REASONING if summary.reasoning.get(status)]
    reasoning = f"reasoning under spec '{spec}': {', '.join(found)} (dataidx info explains each problem)"
    return "\n".join([table(["dataset", "status", "entries"], summary.counts), *filter(None, [
        causes_note(spec, summary.causes), reasoning if found else ""])])


def render_specs_text(specs: list[dict[str, Any]], said: dict[str, tuple[str, str]]) -> str:
    """What ``dataidx info`` says of the render specs: a table, then per spec the date its template
    reads, why entries do not train, its reasoning problems (one line each with a first example;
    ``said`` words them, as :attr:`dataidx.store.Specs.REASONING_SAID`), then the plain added tokens."""
    keys = ("name", "template", "cutoff", "truncation", "escapes", "entries", "kept", "tokenizer")
    parts = ["\nrender specs (dataidx render):",
             table(["spec", "template", "cutoff", "truncation", "escapes", "entries", "train", "tokenizer"],
                   [tuple(s[key] for key in keys) for s in specs])]
    for spec in specs:
        if spec["tokens"] is not None:
            tokens = spec["tokens"]
            served = ("its processor computes pixels on fetch" if spec.get("media_proof")
                      else "served without a tokenizer")
            parts.append(f"spec '{spec['name']}': tokens stored, {tokens['tokens']:,} in {tokens['file']} "
                         f"({tokens['bytes_per_token']:.2f} bytes per token): {served}")
        if spec.get("media_proof"):
            parts.append(f"spec '{spec['name']}': media rendered with its folder's processor, counted from headers "
                         f"({spec['media_proof']})")
        if spec["clock"] is not None:
            parts.append(f"spec '{spec['name']}': its template reads the date, fixed at {spec['clock']}")
        if spec["trust_remote_code"]:
            parts.append(f"spec '{spec['name']}': its tokenizer is a class of its folder's own code, run with "
                         "--trust-remote-code (its readers need the flag too)")
        parts.append(causes_note(spec["name"], [tuple(cause.values()) for cause in spec["causes"]]))
        for found in spec["reasoning_problems"]:
            what, why = said[found["status"]]
            example = (f"{found['dataset']} row {found['row']}"
                       + ("" if found["cut"] is None else f" cut {found['cut']}"))
            parts.append(f"spec '{spec['name']}': {what} in {found['entries']} entr"
                         f"{'y' if found['entries'] == 1 else 'ies'} (e.g. {example}): {why}")
    if any(spec["added_tokens"] for spec in specs):
        parts.append(added_tokens_table(specs))
    return "\n".join(filter(None, parts))


def spec_composition_notes(store: str, spec: str, mixture: str, rows: list[dict[str, Any]]) -> str:
    """What ``dataidx compose --spec`` says under its main table: reasoning per dataset (of the
    entries that train), then why the spec's entries of the mixture's datasets that do not train do not."""
    reasoning = ("\nreasoning, of the entries that train (dataidx info explains the problems):\n"
                 + table(["dataset", *Mixtures.REASONING_COLUMNS],
                         [(row["dataset"], *(row[c] for c in Mixtures.REASONING_COLUMNS)) for row in rows]))
    with open_store(store) as handle:
        found = Specs(handle).causes_in(spec, mixture)
    causes = causes_note(spec, found, within=f"mixture '{mixture}'")
    return "\n".join(filter(None, [reasoning, causes]))


def merged_and_kept(rows: dict[str, int]) -> tuple[str, str]:
    """Conversations per ``--merge-cuts`` outcome, said as ``(merged, kept as cuts and why)``."""
    merged = [f"{rows[outcome]:,} {label}" for outcome, label in
              (("merged", "as one sequence"), ("tree", "as prefix trees")) if outcome in rows]
    kept = [f"{count:,} {outcome}" for outcome, count in rows.items() if outcome not in ("merged", "tree")]
    return ", ".join(merged) or "no conversation", ", ".join(kept)


def merges_said(plan: dict[str, Any]) -> str:
    """A plan made with ``--merge-cuts`` in one line: conversations merged, kept as cuts and why, tokens."""
    merged, kept = merged_and_kept({merge["outcome"]: merge["rows"] for merge in plan["merges"]})
    before = sum(merge["cut_tokens"] for merge in plan["merges"])
    after = sum(merge["tokens"] for merge in plan["merges"])
    return (f"plan '{plan['plan']}' merges cuts ({plan['merge_cuts']}): {merged}"
            + (f"; kept as cuts: {kept}" if kept else "")
            + f"; conversations' tokens forwarded {before:,} -> {after:,}")

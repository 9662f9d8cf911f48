"""Measure what hostile rows cost: each bound is a function that prints one table.

    python scripts/bounds.py turns                 # one row of 1k/2k/4k/8k one-character turns, rendered
    python scripts/bounds.py turns --sizes 500 4000
    python scripts/bounds.py report                # the report of one 1 MB row, and of 50/100/200 datasets
    python scripts/bounds.py template              # crafted chat templates stopped, and what the checks cost
    python scripts/bounds.py turns report template --sizes 10 --datasets 3 --budget 0.5 --crafted 2  # the tests' smoke

Every figure is taken in a fresh child process (``os.wait4`` gives that child's own peak RSS), so
one measurement's imports and leftovers never count in the next. Nothing is downloaded: the
tokenizer is the tests' tiny byte-level BPE, trained here. Add a bound by writing a function
``name(args) -> None`` and listing it in :data:`BOUNDS`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from scratch import scratch_folder

REPO = Path(__file__).resolve().parents[1]


def measured(*argv: str) -> tuple[dict, float]:
    """Run this script with ``argv`` in a child; its JSON result and its peak RSS in MB."""
    child = subprocess.Popen([sys.executable, __file__, *argv], stdout=subprocess.PIPE, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{' '.join(argv)}: the child failed with exit code {child.returncode}")
    return json.loads(out.splitlines()[-1]), usage.ru_maxrss / 1024  # Linux: kilobytes


def print_table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    for row in [header, *lines]:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))


# --- turns: one row of many one-character turns, rendered ---------------------------------------

@functools.cache
def _work() -> tuple[Path, Path]:
    """A fresh folder (offline Hugging Face caches in it) and the tests' tiny tokenizer there: one
    for all the bounds of a run."""
    work = scratch_folder("dataidx-bounds-")
    os.environ.update(HF_HOME=str(work / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")  # before datasets loads
    measured("_tokenizer", str(work / "tokenizer"))
    return work, work / "tokenizer"


def turns(args: argparse.Namespace) -> None:
    """Issue 24 item 8: one row of N one-character human/gpt exchanges (N cuts), rendered with
    ``--jobs 1`` under ChatML at cutoff 4096. Before the fix 4,000 turns took 257 s and 8.0 GB."""
    work, tokenizer = _work()
    lines = []
    for size in args.sizes:
        store, row_bytes = _turns_store(work, size)
        result, peak = measured("_render", str(store), str(tokenizer), str(args.cutoff))
        lines.append((f"{size:,}", f"{row_bytes / 1024:,.0f}", f"{result['seconds']:.2f}", f"{peak:,.0f}",
                      f"{result['ok']:,}", f"{result['too_long']:,}"))
    print(f"one row of N one-character turns, chatml, cutoff {args.cutoff}, --jobs 1 (fresh process each)")
    print_table(("turns", "row KB", "seconds", "peak RSS MB", "ok", "too_long"), lines)


def _turns_store(work: Path, size: int) -> tuple[Path, int]:
    from dataidx.index import build

    conversation = [message for _ in range(size) for message in ({"from": "human", "value": "q"},
                                                                  {"from": "gpt", "value": "a"})]
    line = json.dumps({"conversations": conversation}) + "\n"
    data = work / f"turns{size}.jsonl"
    data.write_text(line)
    config = work / f"turns{size}.yaml"
    config.write_text(f"turns:\n  path: {data}\n  source: local\n  converter: sharegpt\n")
    store = work / f"turns{size}.db"
    build(config, store)
    return store, len(line.encode())


def _tokenizer(folder: str) -> dict:
    sys.path.insert(0, str(REPO))
    from tests.helpers import train_tokenizer

    train_tokenizer(Path(folder))
    return {}


def _render(store: str, tokenizer: str, cutoff: str) -> dict:
    from dataidx.render import RenderRequest, render_store

    started = time.perf_counter()
    summary = render_store(RenderRequest(store, tokenizer, cutoff=int(cutoff), template="chatml", jobs=1))
    counts = {status: count for _, status, count in summary.counts}
    return {"seconds": time.perf_counter() - started, "ok": counts.get("ok", 0), "too_long": counts.get("too_long", 0)}


# --- report: its size and time for a 1 MB row, and for many datasets ----------------------------

def report(args: argparse.Namespace) -> None:
    """Issue 24 item 10: the HTML report of one 1 MB too_long row (before: a 55 MB page of 728k
    token spans), of a 60 KB row that trains truncated (a sample shown: at most the cutoff's
    tokens), and of 50/100/200 datasets (before: 55 s for 200)."""
    work, tokenizer = _work()
    lines = []
    cases = [("one 1 MB row", 1, 1, 85_000), ("one 60 KB row, shown", 1, 1, 5_000)]
    cases += [(f"{count} datasets", count, 4, 20) for count in args.datasets]
    for label, datasets, rows, words in cases:
        store, data_bytes = _report_store(work / label.replace(" ", "-"), datasets, rows, words, tokenizer)
        result, peak = measured("_report", str(store))
        lines.append((label, f"{data_bytes / 1e6:,.2f}", f"{result['bytes'] / 1e6:,.2f}", f"{result['seconds']:.2f}",
                      f"{peak:,.0f}"))
    print("dataidx report --spec default (tiny tokenizer, chatml, cutoff 4096, truncation right; fresh process each)")
    print_table(("store", "data MB", "report MB", "seconds", "peak RSS MB"), lines)


def _report_store(folder: Path, datasets: int, rows: int, words: int, tokenizer: Path) -> tuple[Path, int]:
    from dataidx.index import build
    from dataidx.render import RenderRequest, render_store

    folder.mkdir(parents=True)
    config, size = [], 0
    for number in range(datasets):
        data = folder / f"d{number}.jsonl"
        data.write_text("".join(json.dumps({"instruction": f"question {row}", "output": "lorem ipsum " * words}) + "\n"
                                for row in range(rows)))
        size += data.stat().st_size
        config.append(f"d{number}:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    (folder / "config.yaml").write_text("".join(config))
    build(folder / "config.yaml", folder / "store.db")
    render_store(RenderRequest(folder / "store.db", tokenizer, cutoff=4096, template="chatml", truncation="right",
                               jobs=1))
    return folder / "store.db", size


def _report(store: str) -> dict:
    from dataidx.view import write_report

    output = Path(store).with_suffix(".html")
    started = time.perf_counter()
    write_report(store, output, spec="default")
    return {"seconds": time.perf_counter() - started, "bytes": output.stat().st_size}


# --- template: crafted chat templates stopped by their budget, and what the checks cost ---------

#: Templates that would run for hours or allocate gigabytes without the sandbox's budget.
CRAFTED = {
    "nested loops (1e10 iterations)": "{% for i in range(100000) %}{% for j in range(100000) %}"
                                      "{% endfor %}{% endfor %}",
    "a macro calling itself twice (2^60)": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                                           "{% endmacro %}{{ f(60) }}",
    "'x' * 3000000000": "{{ 'x' * 3000000000 }}",
    "a string doubled 60 times": "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}"
                                 "{% endfor %}{{ ns.s | length }}",
    "a set block written 1e10 times": "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}abcdefgh"
                                      "{% endfor %}{% endfor %}{% endset %}{{ x | length }}",
}


def template(args: argparse.Namespace) -> None:
    """Issue 24 item 11: each crafted template renders one entry under the default budget (10 s,
    characters 4x the spec's hard bound + 1 MiB; ``--budget`` sets the seconds); then the checks'
    cost on real templates."""
    work, tokenizer = _work()
    lines = []
    for name in list(CRAFTED)[: args.crafted]:
        result, peak = measured("_crafted", str(tokenizer), name, str(args.budget or ""))
        lines.append((name, f"{result['seconds']:.2f}", f"{peak:,.0f}", result["status"], result["detail"][:60]))
    print("one entry rendered with a crafted template, cutoff 4096 (fresh process each)")
    print_table(("template", "seconds", "peak RSS MB", "status", "detail"), lines)
    print("\nwhat the checks cost: one 8-message conversation's text, Jinja only (microseconds, best of 7 in turns)")
    result, _ = measured("_jinja_cost")
    print_table(("template", "Hugging Face's sandbox", "with the budget", "ratio"),
                [(name, f"{plain:.1f}", f"{budgeted:.1f}", f"{budgeted / plain:.2f}x")
                 for name, (plain, budgeted) in result.items()])


def _crafted(tokenizer: str, name: str, budget: str = "") -> dict:
    from dataidx.render import Renderer, load_tokenizer, sandbox

    if budget:
        sandbox.TEMPLATE_SECONDS = float(budget)  # read by each Renderer made after this
    renderer = Renderer(load_tokenizer(tokenizer), CRAFTED[name], cutoff=4096)
    sample = {"messages": [{"role": role, "content": [{"type": "text", "value": text}]}
                           for role, text in (("user", "hi"), ("assistant", "ok"))]}
    started = time.perf_counter()
    rendered = renderer.render(sample, True)
    return {"seconds": time.perf_counter() - started, "status": rendered.status, "detail": rendered.detail or ""}


def _jinja_cost() -> dict:
    import timeit

    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from dataidx.render import BUILTIN_TEMPLATES, compile_template

    def tojson(value: object, indent: int | None = None) -> str:  # transformers' filter, as dataidx has it
        return json.dumps(value, ensure_ascii=False, indent=indent)

    def plain_blocks(text: str) -> str:  # Hugging Face's {% generation %} block as a plain one
        return re.sub(r"\{%(-?)\s*(end)?generation\s*(-?)%\}",
                      lambda tag: f"{{%{tag[1]} {'endif' if tag[2] else 'if true'} {tag[3]}%}}", text)

    chat = [{"role": ("user", "assistant")[i % 2], "content": "hello there, " * 20} for i in range(8)]
    variables = {"bos_token": "<s>", "eos_token": "</s>", "messages": chat, "tools": None,
                 "add_generation_prompt": False}
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    plain.filters["tojson"] = tojson
    costs = {}
    for name in ("chatml", "llama3", "internlm2"):
        text = plain_blocks(BUILTIN_TEMPLATES[name])
        old, new = plain.from_string(text), compile_template(BUILTIN_TEMPLATES[name])
        assert old.render(**variables) == new.render(**variables)
        times: list[list[float]] = [[], []]
        for _ in range(7):  # in turns, so a slow minute of a shared machine slows both
            for number, one in enumerate((old, new)):
                times[number].append(timeit.timeit(lambda t=one: t.render(**variables), number=500) / 500 * 1e6)
        costs[name] = [min(times[0]), min(times[1])]
    return costs


#: The bounds ``main`` can run, by name.
BOUNDS: dict[str, Callable[[argparse.Namespace], None]] = {"turns": turns, "report": report, "template": template}
#: What a child process measures: ``python scripts/bounds.py _render ...`` prints one JSON line.
_CHILDREN: dict[str, Callable[..., dict]] = {"_tokenizer": _tokenizer, "_render": _render, "_report": _report,
                                             "_crafted": _crafted, "_jinja_cost": _jinja_cost}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in _CHILDREN:
        print(json.dumps(_CHILDREN[sys.argv[1]](*sys.argv[2:])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bounds", nargs="+", choices=sorted(BOUNDS), help="which bounds to measure")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000],
                        help="turns: the rows' numbers of turns")
    parser.add_argument("--cutoff", type=int, default=4096, help="turns: the render's cutoff")
    parser.add_argument("--datasets", type=int, nargs="+", default=[50, 100, 200],
                        help="report: the stores' numbers of datasets (after the two one-row stores)")
    parser.add_argument("--budget", type=float, help="template: the sandbox's seconds per entry (default: dataidx's)")
    parser.add_argument("--crafted", type=int, help=f"template: render only the first N of the {len(CRAFTED)} crafted "
                        "templates (default: all)")
    args = parser.parse_args()
    for number, name in enumerate(args.bounds):
        if number:
            print()
        BOUNDS[name](args)


if __name__ == "__main__":
    main()

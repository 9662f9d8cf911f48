"""Measure what hostile rows cost: each bound is a function that prints one table.

    python scripts/bounds.py turns                 # one row of 1k/2k/4k/8k one-character turns, rendered
    python scripts/bounds.py turns --sizes 500 4000

Every figure is taken in a fresh child process (``os.wait4`` gives that child's own peak RSS), so
one measurement's imports and leftovers never count in the next. Nothing is downloaded: the
tokenizer is the tests' tiny byte-level BPE, trained here. Add a bound by writing a function
``name(args) -> None`` and listing it in :data:`BOUNDS`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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

def turns(args: argparse.Namespace) -> None:
    """Issue 24 item 8: one row of N one-character human/gpt exchanges (N cuts), rendered with
    ``--jobs 1`` under ChatML at cutoff 4096. Before the fix 4,000 turns took 257 s and 8.0 GB."""
    work = Path(tempfile.mkdtemp(prefix="dataidx-bounds-"))
    os.environ.update(HF_HOME=str(work / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")  # before datasets loads
    tokenizer = work / "tokenizer"
    measured("_tokenizer", str(tokenizer))
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
    from tests.conftest import train_tokenizer

    train_tokenizer(Path(folder))
    return {}


def _render(store: str, tokenizer: str, cutoff: str) -> dict:
    from dataidx.render import render_store

    started = time.perf_counter()
    summary = render_store(store, tokenizer, cutoff=int(cutoff), template="chatml", jobs=1)
    counts = {status: count for _, status, count in summary.counts}
    return {"seconds": time.perf_counter() - started, "ok": counts.get("ok", 0), "too_long": counts.get("too_long", 0)}


#: The bounds ``main`` can run, by name.
BOUNDS: dict[str, Callable[[argparse.Namespace], None]] = {"turns": turns}
#: What a child process measures: ``python scripts/bounds.py _render ...`` prints one JSON line.
_CHILDREN: dict[str, Callable[..., dict]] = {"_tokenizer": _tokenizer, "_render": _render}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in _CHILDREN:
        print(json.dumps(_CHILDREN[sys.argv[1]](*sys.argv[2:])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bounds", nargs="+", choices=sorted(BOUNDS), help="which bounds to measure")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000],
                        help="turns: the rows' numbers of turns")
    parser.add_argument("--cutoff", type=int, default=4096, help="turns: the render's cutoff")
    args = parser.parse_args()
    for number, name in enumerate(args.bounds):
        if number:
            print()
        BOUNDS[name](args)


if __name__ == "__main__":
    main()

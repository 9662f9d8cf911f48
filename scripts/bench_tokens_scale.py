"""Stored tokens at scale (issue 27): build and ``render --store-tokens`` of ~2M entries, timed.

    python scripts/bench_tokens_scale.py                        # ~2M entries (about 10-15 minutes on 2 cores)
    python scripts/bench_tokens_scale.py --entries 200000       # a smaller run that proves the script
    python scripts/bench_tokens_scale.py --work /tmp/tok2m      # keep the data for another run

The data is scripts/scale_data.py's (alpaca rows and sharegpt conversations of 1 to 6
exchanges), the tokenizer a byte-level BPE of 8k trained on it, ChatML at cutoff 4096. Every
command runs in a fresh process under a wrapper that reports its wall time, the peak RSS of its
largest process (``getrusage`` of the children: the render's parent or one of its workers) and
the peak of the whole tree's PSS (``/proc/*/smaps_rollup`` of the command and its workers,
sampled every 0.2 s: shared pages counted once). Then it reads the token file's figures from the
store and serves a few thousand random fetches from the tokens.

Then ``dataidx verify --tokens`` on a 10k sample and ``dataidx export --format
megatron|olmo|parquet`` of the spec, each timed the same way, with the bytes written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO)]

from bench_common import print_table  # noqa: E402
from scale_common import DATAIDX, FETCH, FETCHES, prepared_work, rows_by_size, snippet  # noqa: E402
from scale_data import generate  # noqa: E402

from dataidx.export.formats import FORMATS  # noqa: E402

#: A wrapper process whose only child is the command: wall seconds, the largest process's peak
#: RSS (KiB, from getrusage) and the peak PSS of the command's process tree (KiB, sampled).
MEASURE_TREE = """
import json, os, resource, subprocess, sys, time
def tree(root):
    children = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(pid))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found
def pss(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total
started = time.perf_counter()
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
peak = 0
while process.poll() is None:
    peak = max(peak, pss(tree(process.pid)))
    time.sleep(0.2)
seconds = time.perf_counter() - started
if process.returncode:
    sys.exit(process.returncode)
print(json.dumps([seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, peak]))
"""

#: bench_scale's fetch snippet over the spec served from its tokens, with the training entries and the
#: rendering modules the process loaded.
TOKEN_FETCH = (FETCH.replace("DataEngine(sys.argv[1])", "DataEngine(sys.argv[1], render=sys.argv[2])")
               .replace("{fetches}", str(FETCHES))
               .replace("[first, single, batched]", "[len(engine), first, single, batched, sorted(m for m in "
                        "('transformers', 'tokenizers', 'jinja2') if m in sys.modules)]"))

SPEC = "tokens"
VERIFY_SAMPLE = 10_000


def measured(*command: str, env: dict[str, str]) -> tuple[float, float, float]:
    """``(seconds, peak RSS of the largest process, peak PSS of the tree)`` of a command, MiB."""
    out = subprocess.run([sys.executable, "-c", MEASURE_TREE, *command], check=True, capture_output=True, text=True,
                         env=env).stdout
    seconds, largest, tree = json.loads(out)
    return seconds, largest / 1024, tree / 1024


def figures(label: str, seconds: float, largest: float, tree: float) -> dict[str, str]:
    return {f"{label} (s)": f"{seconds:.1f}", f"{label}, peak RSS of one process (MiB)": f"{largest:,.0f}",
            f"{label}, peak PSS of the process tree (MiB)": f"{tree:,.0f}"}


def verify_sample(store: Path, env: dict[str, str]) -> dict[str, str]:
    """``dataidx verify STORE --tokens --sample 10000``, timed."""
    command = [*DATAIDX, "verify", str(store), "--tokens", "--sample", str(VERIFY_SAMPLE)]
    return figures(f"verify --tokens --sample {VERIFY_SAMPLE:,}", *measured(*command, env=env))


def export_formats(store: Path, out: Path, env: dict[str, str]) -> dict[str, str]:
    """``dataidx export STORE --spec SPEC --format F`` for each format, timed, with the bytes written."""
    found: dict[str, str] = {}
    for name in FORMATS:  # every registered format
        target = out / f"export-{name}"
        shutil.rmtree(target, ignore_errors=True)
        command = [*DATAIDX, "export", str(store), "--spec", SPEC, "--format", name, "-o", str(target)]
        found |= figures(f"export --format {name}", *measured(*command, env=env))
        written = sum(p.stat().st_size for p in target.rglob("*") if p.is_file()) if target.is_dir() else 0
        found[f"export --format {name}, bytes written (MB)"] = f"{written / 1e6:,.1f}"
    return found


def tokenizer_for(folder: Path) -> Path:
    """A byte-level BPE of 8k trained on the data's alpaca outputs (as scripts/bench.py does)."""
    from tests.helpers import train_tokenizer

    from dataidx.render import CHATML

    path = folder / "tokenizer"
    if not path.exists():
        with (folder / "alpaca.jsonl").open() as rows:
            corpus = [json.loads(line)["output"] for _, line in zip(range(5000), rows)]
        train_tokenizer(path, vocab_size=8000, chat_template=CHATML, corpus=corpus)
    return path


def scale_row(work: Path, entries: int, env: dict[str, str]) -> dict[str, str]:
    folder = work / f"{entries}"
    config = folder / "bench.yaml"
    if not config.exists():
        generate(folder, entries)
    tokenizer = tokenizer_for(folder)
    warm = ("import sys; from dataidx.config import load_config; from dataidx.sources import load\n"
            "for spec in load_config(sys.argv[1]).datasets: load(spec)")
    subprocess.run([sys.executable, "-c", warm, str(config)], check=True, env=env)
    store = folder / "bench.db"
    store.unlink(missing_ok=True)
    shutil.rmtree(folder / "bench.db.tokens", ignore_errors=True)
    row = figures("build", *measured(*DATAIDX, "build", str(config), "-o", str(store), "-q", env=env))
    row |= figures("render --store-tokens", *measured(
        *DATAIDX, "render", str(store), "--tokenizer", str(tokenizer), "--cutoff", "4096", "--name", SPEC,
        "--store-tokens", env=env))
    with sqlite3.connect(store) as connection:
        base = connection.execute("SELECT count(*) FROM base_entries").fetchone()[0]
        file_bytes, tokens, word_bytes, seconds = connection.execute(
            "SELECT t.bytes, t.tokens, t.word_bytes, t.seconds FROM spec_tokens AS t "
            "JOIN render_specs AS s ON s.id = t.spec_id WHERE s.name = ?", (SPEC,)).fetchone()
    connection.close()
    served, first, single, batched, loaded = snippet(TOKEN_FETCH, str(store), SPEC, env=env)
    row |= {
        "base entries": f"{base:,}",
        "training entries (served from tokens)": f"{served:,}",
        "tokens stored": f"{tokens:,}",
        "token file (MB)": f"{file_bytes / 1e6:,.1f}",
        "token file bytes / token": f"{file_bytes / tokens:.3f} ({word_bytes}-byte words)",
        "spec_tokens.seconds (the token write, as the store records it)": f"{seconds:.1f}",
        "render --store-tokens, entries/s": f"{base / float(row['render --store-tokens (s)']):,.0f}",
        "open -> first sample from tokens (s, imports included)": f"{first:.3f}",
        "engine[i] from tokens, random (samples/s)": f"{single:,.0f}",
        "engine[list of 256] from tokens (samples/s)": f"{batched:,.0f}",
        "rendering modules loaded serving from tokens": ", ".join(loaded) or "none",
    }
    row |= verify_sample(store, env)
    row |= export_formats(store, folder, env)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, nargs="*", default=[2_000_000])
    parser.add_argument("--work", type=Path, help="keep generated data and HF caches here "
                        "(default: a temporary folder)")
    args = parser.parse_args()
    work, env = prepared_work(args.work, "dataidx-tokens-scale-")
    rows = rows_by_size(args.entries, work, env, scale_row)
    labels = list(dict.fromkeys(label for row in rows.values() for label in row))
    table = [(label, *(row.get(label, "-") for row in rows.values())) for label in labels]
    print(f"{os.cpu_count()} cores, python {sys.version.split()[0]}, data: scripts/scale_data.py, byte-level BPE of "
          "8k trained on it, chatml, cutoff 4096, render at default jobs")
    print_table(("figure", *(f"~{entries / 1e6:g}M" for entries in rows)), table)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""dataidx report at bench size, beside counting the same figures in Python row by row.

    python scripts/bench_report.py                            # 1M alpaca + 250k sharegpt: ~1.9M entries
    python scripts/bench_report.py --alpaca 10000 --sharegpt 2500

The store is built from generated data (scripts/bench.py). Rendering 1.9M entries would take
minutes, so the spec's row is made by `dataidx render` of a small store with the same tokenizer
and template, and its lengths (lognormal, the long ones too_long) are written by SQL; the plan is
a real `dataidx pack`. The report runs as `dataidx report` in a fresh process: wall time, peak
memory (RSS) and file size. The alternative counts composition and length histograms by fetching
every row into Python.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO)]

from bench_common import generate, print_table  # noqa: E402

from dataidx.index import build  # noqa: E402
from dataidx.pack import pack_store  # noqa: E402
from dataidx.render import RenderRequest, render_store  # noqa: E402
from dataidx.store import run_query  # noqa: E402

TOKENIZER = REPO / "data" / "demo_tokenizer"
CUTOFF = 2048


def synthetic_spec(store: Path, work: Path) -> None:
    """Spec 'bench' on every base entry of ``store``: a real spec row, lengths written by SQL."""
    small = work / "small"
    small.mkdir()
    build(generate(small, 20, 5), small / "small.db")
    render_store(RenderRequest(small / "small.db", TOKENIZER, cutoff=CUTOFF, name="bench", jobs=1))
    with sqlite3.connect(small / "small.db") as source:
        columns = [row[1] for row in source.execute("PRAGMA table_info(render_specs)") if row[1] != "id"]
        spec = source.execute(f"SELECT {', '.join(columns)} FROM render_specs").fetchone()
    with sqlite3.connect(store) as connection:
        first, last = connection.execute("SELECT min(id), max(id) FROM base_entries").fetchone()
        lengths = np.clip(np.random.default_rng(0).lognormal(6.0, 0.9, last - first + 1).astype(int), 16, 8000)
        values = dict(zip(columns, spec), entries=len(lengths), kept=int((lengths <= CUTOFF).sum()))
        connection.execute(f"INSERT INTO render_specs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                           list(values.values()))
        spec_id = connection.execute("SELECT id FROM render_specs WHERE name = 'bench'").fetchone()[0]
        connection.executemany(
            "INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, status, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            ((spec_id, first + i, int(n), int(n) // 3, int(n), "ok" if n <= CUTOFF else "too_long",
              None if n <= CUTOFF else f"{n} tokens > cutoff {CUTOFF}") for i, n in enumerate(lengths.tolist())))


def python_counts(store: str) -> None:
    """Count entries per dataset and lengths per dataset and status, row by row."""
    _, rows = run_query(store, "SELECT dataset FROM entries WHERE mixture = 'default'")
    Counter(dataset for dataset, in rows)
    _, rows = run_query(store, "SELECT dataset, status, full_tokens FROM entry_lengths WHERE spec = 'bench'")
    Counter((dataset, status, tokens // 200) for dataset, status, tokens in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpaca", type=int, default=1_000_000)
    parser.add_argument("--sharegpt", type=int, default=250_000)
    parser.add_argument("--keep", metavar="DIR", help="build in DIR and keep it (reused when its store is there)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dataidx-bench-report-") as folder:
        work = Path(args.keep or folder)
        work.mkdir(parents=True, exist_ok=True)
        store = work / "bench.db"
        started = time.perf_counter()
        if not store.exists():
            build(generate(work, args.alpaca, args.sharegpt), store)
            synthetic_spec(store, work)
            pack_store(store, "bench", capacity=4096, name="bench")
        entries = run_query(store, "SELECT entries FROM mixtures WHERE name = 'default'")[1][0][0]
        print(f"store of {entries:,} entries ready in {time.perf_counter() - started:.1f} s")
        command = [sys.executable, "-m", "dataidx", "report", str(store), "-o", str(work / "report.html"),
                   "--spec", "bench", "--plan", "bench", "--samples", "5", "-q"]
        # A wrapper process whose only child is the report, so its peak RSS is the report's alone.
        measure = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
                   "subprocess.run(sys.argv[1:], check=True); "
                   "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", measure, *command], check=True, capture_output=True,
                             text=True).stdout
        report_seconds, peak = float(out.split()[0]), int(out.split()[1]) / 1024
        counting = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r}); "
                    f"from bench_report import python_counts; python_counts({str(store)!r})"]
        out = subprocess.run([sys.executable, "-c", measure, *counting], check=True, capture_output=True,
                             text=True).stdout
        python_seconds, python_peak = float(out.split()[0]), int(out.split()[1]) / 1024
        size = (work / "report.html").stat().st_size
        print_table(("way", "seconds", "peak RSS (MiB)", "output"), [
            ("dataidx report (fresh process, imports and tokenizer load included)", f"{report_seconds:.1f}",
             f"{peak:,.0f}", f"{size / 1024:,.0f} KiB HTML"),
            ("Python: fetch every entry and length row, count (composition and histogram only)",
             f"{python_seconds:.1f}", f"{python_peak:,.0f}", "two Counters"),
        ])


if __name__ == "__main__":
    main()

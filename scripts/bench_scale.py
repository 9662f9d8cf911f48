"""dataidx at scale: stores of about 2M, 10M and 20M entries, side by side, on this machine.

    python scripts/bench_scale.py                          # 2M, 10M, 20M entries (about 20 minutes, 15 GB of disk)
    python scripts/bench_scale.py --entries 2000000 --work /tmp/scale   # keep the data for another run
    python scripts/bench_scale.py --entries 2000000 --work /tmp/scale --cookbook-only   # its store's cookbook again

For each size the data is generated (scripts/scale_data.py), the HF cache warmed in a child
process, and every command then runs as a user meets it, in a fresh process, measured by a
wrapper that reports its wall time and peak RSS (the child's alone):

- ``dataidx build`` of the default mixture, the store's size per entry;
- opening a store and reading the first sample, ``engine[i]`` at random and ``engine[list of 256]``;
- ``dataidx info``, ``dataidx compose`` and the cookbook's composition queries;
- ``dataidx mix`` of a second mixture (alpaca halved, sharegpt doubled: a draw of distinct
  entries and one of whole repeats plus a remainder) and ``dataidx mix --sampling replacement``;
- ``dataidx pack`` at 4096 over a spec of lognormal lengths written for every base entry.

Rendering runs once on a sample (its cost is per entry, not per store), as scripts/bench.py
measures it: ``dataidx render`` at 1 and 2 processes beside the ceiling, the tokenizer alone
encoding the same texts (each entry whole and its prompt) in batches.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts")]

from bench_common import print_table  # noqa: E402
from bench_render import render_table  # noqa: E402
from scale_common import DATAIDX, FETCH, FETCHES, measured, prepared_work, rows_by_size, snippet, synthetic_spec  # noqa: E402
from scale_data import generate  # noqa: E402

COOKBOOK_QUERY = """
import sys, time
from dataidx.store import run_query
t = time.perf_counter()
run_query(sys.argv[1], sys.argv[2])
print(time.perf_counter() - t)
"""
COOKBOOK_SECONDS = 120

COMPOSITION = """
import json, sys, time
from dataidx.store import composition, run_query
t = time.perf_counter()
composition(sys.argv[1], "default")
view = time.perf_counter() - t
t = time.perf_counter()
run_query(sys.argv[1], "SELECT dataset, entries, share FROM composition WHERE mixture = 'default'")
run_query(sys.argv[1], "SELECT dataset, distinct_rows FROM composition WHERE mixture = 'default'")
print(json.dumps([view, time.perf_counter() - t]))
"""


def scale_row(work: Path, entries: int, env: dict[str, str]) -> dict[str, str]:
    folder = work / f"{entries}"
    config = folder / "bench.yaml"
    if not config.exists():
        generate(folder, entries)
    warm = ("import sys; from dataidx.config import load_config; from dataidx.sources import load\n"
            "for spec in load_config(sys.argv[1]).datasets: load(spec)")
    subprocess.run([sys.executable, "-c", warm, str(config)], check=True, env=env)
    store = folder / "bench.db"
    store.unlink(missing_ok=True)
    build_s, build_rss = measured(*DATAIDX, "build", str(config), "-o", str(store), "-q", env=env)
    count = sqlite3.connect(store).execute("SELECT entries FROM mixtures WHERE name = 'default'").fetchone()[0]
    size = store.stat().st_size  # the store as built: base index and default mixture
    first, single, batched = snippet(FETCH.replace("{fetches}", str(FETCHES)), str(store), env=env)
    info_s, _ = measured(*DATAIDX, "info", str(store), env=env)
    compose_s, _ = measured(*DATAIDX, "compose", str(store), env=env)
    view_s, queries_s = snippet(COMPOSITION, str(store), env=env)
    mix = folder / "mix.yaml"
    mix.write_text(config.read_text().replace("converter: alpaca", "converter: alpaca\n  weight: 0.5")
                   .replace("converter: sharegpt", "converter: sharegpt\n  weight: 2.5"))
    mix_s, mix_rss = measured(*DATAIDX, "mix", str(store), str(mix), "--name", "halved", env=env)
    replacement_s, replacement_rss = measured(*DATAIDX, "mix", str(store), str(mix), "--name", "drawn",
                                              "--sampling", "replacement", env=env)
    synthetic_spec(store)
    pack_s, pack_rss = measured(*DATAIDX, "pack", str(store), "--spec", "bench", "--capacity", "4096", env=env)
    cookbook = cookbook_seconds(store, env)
    return cookbook | {
        "entries": f"{count:,}",
        "build (s)": f"{build_s:.1f}",
        "build peak RSS (MiB)": f"{build_rss:,.0f}",
        "store as built (bytes/entry)": f"{size / count:.1f}",
        "open -> first sample (s, imports included)": f"{first:.3f}",
        "engine[i], random (samples/s)": f"{single:,.0f}",
        "engine[list of 256] (samples/s)": f"{batched:,.0f}",
        "`dataidx info` (s)": f"{info_s:.2f}",
        "`dataidx compose` (s)": f"{compose_s:.2f}",
        "composition() / two cookbook queries (s)": f"{view_s:.3f} / {queries_s:.3f}",
        "`dataidx mix`, exact (s)": f"{mix_s:.1f}",
        "`dataidx mix`, exact, peak RSS (MiB)": f"{mix_rss:,.0f}",
        "`dataidx mix`, replacement (s)": f"{replacement_s:.1f}",
        "`dataidx mix`, replacement, peak RSS (MiB)": f"{replacement_rss:,.0f}",
        "`dataidx pack` 4096, all entries (s)": f"{pack_s:.1f}",
        "`dataidx pack` peak RSS (MiB)": f"{pack_rss:,.0f}",
    }


def cookbook_seconds(store: Path, env: dict[str, str]) -> dict[str, str]:
    """Each query of docs/sql.md on this store (its names: mixtures 'default' and 'halved', spec
    'bench', plan 'default'), in a fresh process, cut off after two minutes."""
    from dataidx.view import COOKBOOK

    found = {}
    for number, (title, sql) in enumerate(COOKBOOK, 1):
        sql = sql.replace("'seed7'", "'halved'").replace("s.name = 'default'", "s.name = 'bench'")
        try:
            out = subprocess.run([sys.executable, "-c", COOKBOOK_QUERY, str(store), sql], check=True,
                                 capture_output=True, text=True, env=env, timeout=COOKBOOK_SECONDS).stdout
            seconds = f"{float(out):.2f}"
        except subprocess.TimeoutExpired:
            seconds = f"> {COOKBOOK_SECONDS}"
        found[f"cookbook {number}: {title[:48]} (s)"] = seconds
    return found


def cookbook_row(work: Path, entries: int, env: dict[str, str]) -> dict[str, str]:
    """The cookbook's seconds on the store a full run left for this size."""
    return cookbook_seconds(work / f"{entries}" / "bench.db", env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, nargs="*", default=[2_000_000, 10_000_000, 20_000_000])
    parser.add_argument("--render", type=int, default=40_000, help="alpaca rows (and a quarter as many "
                        "conversations) of the rendering sample; 0 skips it")
    parser.add_argument("--work", type=Path, help="keep generated data and HF caches here "
                        "(default: a temporary folder)")
    parser.add_argument("--cookbook-only", action="store_true", help="only time the cookbook queries on the "
                        "stores an earlier run left in --work (migrated or not), rebuilding nothing")
    args = parser.parse_args()
    if args.cookbook_only and not args.work:
        parser.error("--cookbook-only reads the stores of an earlier run: give its --work")
    work, env = prepared_work(args.work, "dataidx-scale-")
    random.seed(0)
    if args.cookbook_only:
        args.render = 0
    rows = rows_by_size(args.entries, work, env, cookbook_row if args.cookbook_only else scale_row)
    if rows:
        labels = list(next(iter(rows.values())))
        table = [(label, *(row[label] for row in rows.values())) for label in labels]
        header = ("figure", *(f"~{entries / 1e6:g}M" for entries in rows))
        print(f"{os.cpu_count()} cores, python {sys.version.split()[0]}, data: alpaca rows + sharegpt conversations "
              "(scripts/scale_data.py)")
        print_table(header, table)
    if args.render:
        shutil.rmtree(work / "render", ignore_errors=True)
        entries, lines, _ = render_table(work, args.render)
        print(f"\nrendering: {entries:,} entries of scripts/bench.py's data, a byte-level BPE of 8k trained on it, "
              "chatml, cutoff 4096")
        print_table(("renderer", "entries/s", "seconds"), lines)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

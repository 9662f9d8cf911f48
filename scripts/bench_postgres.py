"""The same store as a SQLite file and in PostgreSQL, side by side: build, open, fetch, mix, query.

    python scripts/bench_postgres.py                           # starts a throwaway local server
    python scripts/bench_postgres.py --url 'postgresql://me@dbhost/db?schema=bench'
    python scripts/bench_postgres.py --alpaca 200000 --sharegpt 50000

A local server over a Unix socket is the best case for PostgreSQL; over a network every fetch
pays the round trip on top. Generated data comes from scripts/bench.py.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO)]

from bench_common import generate, print_table  # noqa: E402
from scratch import scratch_folder  # noqa: E402


def seconds(action: Callable[[], object], runs: int = 1) -> float:
    """Median wall time of ``runs`` calls."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fetch_rate(store: str, positions: list[int], batch: int) -> float:
    """Samples per second over ``positions``, one by one (batch 1) or ``batch`` at a time."""
    from dataidx import DataEngine

    engine = DataEngine(store)
    engine[0]  # connect and map before timing
    started = time.perf_counter()
    if batch == 1:
        for position in positions:
            engine[position]
    else:
        for first in range(0, len(positions), batch):
            engine.__getitems__(positions[first : first + batch])
    return len(positions) / (time.perf_counter() - started)


def loader_rate(store: str, count: int) -> float:
    from torch.utils.data import DataLoader, Subset

    from dataidx import DataEngine

    engine = DataEngine(store)
    subset = Subset(engine, random.Random(1).sample(range(len(engine)), min(count, len(engine))))
    loader = DataLoader(subset, batch_size=64, num_workers=2, collate_fn=list, multiprocessing_context="fork")
    started = time.perf_counter()
    done = sum(len(batch) for batch in loader)
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a PostgreSQL URL (its schema is replaced); default: a throwaway local server")
    parser.add_argument("--alpaca", type=int, default=100_000)
    parser.add_argument("--sharegpt", type=int, default=25_000)
    parser.add_argument("--fetches", type=int, default=5_000)
    parser.add_argument("--loader", type=int, default=20_000)
    args = parser.parse_args()

    from dataidx.index import add_mixture, build
    from dataidx.store import composition, remove_mixture, store_info

    work = scratch_folder("dataidx-pgbench-")
    config = generate(work, args.alpaca, args.sharegpt)
    server = nullcontext(None)
    if args.url is None:
        from tests.postgres_server import running_server

        server = running_server()
    with server as started_url:
        url = args.url or f"{started_url}&schema=bench"
        stores = {"file": str(work / "bench.db"), "postgres": url}
        figures: dict[str, dict[str, float]] = {name: {} for name in stores}
        build(config, work / "warm.db")  # the first build loads the sources into the Arrow cache
        for name, store in stores.items():
            figures[name]["build (s)"] = seconds(lambda store=store: build(config, store), runs=3)
        from dataidx import DataEngine

        entries = len(DataEngine(stores["file"]))
        positions = random.Random(0).sample(range(entries), min(args.fetches, entries))
        for name, store in stores.items():
            row = figures[name]
            row["open DataEngine (ms)"] = 1000 * seconds(lambda store=store: DataEngine(store), runs=5)
            row["random fetch, one at a time (/s)"] = statistics.median(fetch_rate(store, positions, 1)
                                                                        for _ in range(3))
            row["random fetch, batches of 256 (/s)"] = statistics.median(fetch_rate(store, positions, 256)
                                                                         for _ in range(3))
            row["DataLoader, 2 workers (/s)"] = statistics.median(loader_rate(store, args.loader) for _ in range(3))
            row["info (ms)"] = 1000 * seconds(lambda store=store: store_info(store), runs=5)
            row["compose (ms)"] = 1000 * seconds(lambda store=store: composition(store), runs=3)
            row["mix: another mixture (s)"] = seconds(lambda store=store: add_mixture(store, config, "seed7", seed=7))
            remove_mixture(store, "seed7")
        print(f"\n{entries:,} entries ({args.alpaca:,} alpaca + {args.sharegpt:,} sharegpt rows); "
              f"PostgreSQL: {'given URL' if args.url else 'local server, Unix socket'}\n")
        lines = []
        for metric in figures["file"]:
            ours, theirs = figures["file"][metric], figures["postgres"][metric]
            lines.append((metric, f"{ours:,.1f}", f"{theirs:,.1f}", f"{theirs / ours:.2f}x"))
        print_table(("", "SQLite file", "PostgreSQL", "PostgreSQL / file"), lines)


if __name__ == "__main__":
    main()

"""Rendering in shards (issue 54), side by side in one run, on generated data:

    python scripts/bench_shards.py                        # ~30k entries rendered, a merge of 2M entries' parts
    python scripts/bench_shards.py --entries 4000 --merge-entries 20000 --rounds 1 --no-ray   # a smoke run

(a) a serial render in one process; (b) 2 shards on 2 local processes, then their merge, and
its ratio to (a); (c) the same on a local Ray cluster when ``ray`` is importable (its start-up
said apart); (d) the merge alone, ``merge_parts`` over parts of a store of ``--merge-entries``
base entries: the parts are written by ``PartWriter`` with lognormal lengths instead of being
rendered (rendering 2M entries here takes a quarter of an hour), with manifests that check, so
the merge does all its work; (e) on paper, 1B entries on 64 nodes of 32 cores from (a) and (d).

Every render runs on its own copy of the built store (a render writes its spec, and the same
spec again would be a no-op); the rounds take turns, serial then sharded, so a busy moment of a
shared machine does not fall on one of them only, and the median of each is printed.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import sqlite3
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts")]

from bench_common import generate, print_table  # noqa: E402
from scale_data import generate as generate_scale  # noqa: E402
from scratch import scratch_folder  # noqa: E402

from dataidx.index import build  # noqa: E402
from dataidx.read import EntryReader  # noqa: E402
from dataidx.render import RenderRequest, load_tokenizer, merge_parts, render_store, run_shards  # noqa: E402
from dataidx.render.lengths import ENTRIES_PER_RENDER_CHUNK, prepare  # noqa: E402
from dataidx.render.parts import PartWriter  # noqa: E402
from dataidx.render.passes import RangeRendered  # noqa: E402
from dataidx.render.shards import request_record, shard_range  # noqa: E402

TOKENIZER = REPO / "data" / "demo_tokenizer"
CUTOFF = 1024
#: The cluster of paper (e): nodes and cores a node.
NODES, CORES = 64, 32


def built_store(folder: Path, entries: int) -> Path:
    """bench.py's data (alpaca rows, a quarter as many conversations) for about ``entries`` entries, built."""
    folder.mkdir(parents=True)
    alpaca = max(8, round(entries / 1.875))
    store = folder / "bench.db"
    build(generate(folder, alpaca, alpaca // 4), store)
    return store


def fresh_copy(store: Path, name: str) -> Path:
    """A copy of the built store beside it, for one render."""
    copy = store.with_name(f"{name}.db")
    shutil.copyfile(store, copy)
    return copy


def timed(run: Callable[..., object], *args: object, **kwargs: object) -> float:
    """Seconds of ``run(*args, **kwargs)``."""
    started = time.perf_counter()
    run(*args, **kwargs)
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """CPU seconds of this process and its children reaped so far (a Ray worker is not one)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def render_rounds(store: Path, rounds: int, ray: bool) -> dict[str, list[tuple[float, float]]]:
    """``(wall, CPU)`` seconds of each way of rendering, in turns: serial (1 process), 2 local
    shards, 2 Ray shards. On a shared machine the wall ratio says how many cores were free; the
    CPU seconds say what the shards cost in all."""
    request = RenderRequest(store, TOKENIZER, cutoff=CUTOFF, template="chatml")
    ways: dict[str, Callable[[Path], object]] = {
        "serial": lambda copy: render_store(replace(request, store=copy, jobs=1)),
        "local": lambda copy: run_shards(replace(request, store=copy, jobs=2), 2, runner="local"),
    }
    if ray:
        ways["ray"] = lambda copy: run_shards(replace(request, store=copy, jobs=2), 2, runner="ray")
    seconds: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for number in range(rounds):
        for way, run in ways.items():
            copy = fresh_copy(store, f"{way}-{number}")
            cpu = cpu_seconds()
            wall = timed(run, copy)
            seconds[way].append((wall, cpu_seconds() - cpu))
            copy.unlink()
    return seconds


def ray_start() -> float | None:
    """Seconds to start a local Ray cluster of 2 CPUs (None: ray is not installed)."""
    try:
        import ray  # type: ignore[import-not-found]
    except ImportError:
        return None
    return timed(ray.init, num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)


def ray_stop() -> None:
    import ray  # type: ignore[import-not-found]

    ray.shutdown()


def synthetic_parts(store: Path, parts: Path, shards: int, tokenizer: object) -> tuple[int, int]:
    """Write every shard's part of spec 'default' of ``store`` without rendering: lognormal lengths,
    a chunk of rows per line as a shard writes them, manifests a merge accepts. Returns
    ``(entries, bytes of the parts)``."""
    request = RenderRequest(store, TOKENIZER, cutoff=CUTOFF, template="chatml")
    with EntryReader(store) as reader:
        setup = prepare(request, reader, tokenizer, proof=False)
        build_digest = next(digest for kind, _, digest in reader.identity.parts if kind == "build")
        datasets = [(dataset_id, found.first_entry, found.entries) for dataset_id, found in reader.datasets.items()]
    first, last = setup.stored.first, setup.stored.last
    rng = np.random.default_rng(0)
    for shard in range(shards):
        start, end = shard_range(first, last, shard, shards)
        with PartWriter(parts, shard, shards, fingerprint=setup.spec.fingerprint, dtype=None,
                        datasets=datasets) as writer:
            for chunk in range(start, end + 1, ENTRIES_PER_RENDER_CHUNK):
                ids = range(chunk, min(chunk + ENTRIES_PER_RENDER_CHUNK, end + 1))
                tokens = np.clip(rng.lognormal(6.0, 0.9, len(ids)).astype(np.int64), 16, CUTOFF).tolist()
                writer.add(RangeRendered([(entry, n, n // 3, n, "ok", None, None, None)
                                          for entry, n in zip(ids, tokens)], Counter(), None))
            writer.finish({"shard": shard, "shards": shards, "first": start, "last": end,
                           "fingerprint": setup.spec.fingerprint, "build": build_digest,
                           "version": setup.spec.version, "request": request_record(request, setup.spec.clock)})
    return last - first + 1, sum(path.stat().st_size for path in parts.iterdir())


def merge_rounds(store: Path, parts: Path, rounds: int, tokenizer: object) -> list[float]:
    """Seconds of ``merge_parts`` (the tokenizer loaded beforehand), each on a fresh copy of the store."""
    seconds = []
    for number in range(rounds):
        copy = fresh_copy(store, f"merge-{number}")
        seconds.append(timed(merge_parts, copy, parts, tokenizer_object=tokenizer))
        copy.unlink()
    return seconds


def profiled_merge(store: Path, parts: Path, tokenizer: object, path: Path) -> None:
    """One more merge, under cProfile (not timed: the profiler slows it), its stats written to ``path``."""
    copy = fresh_copy(store, "merge-profiled")
    profiler = cProfile.Profile()
    profiler.runcall(merge_parts, copy, parts, tokenizer_object=tokenizer)
    profiler.dump_stats(path)
    copy.unlink()


def print_profile(path: Path) -> None:
    """Where the first merge's time went: the functions that say it, by cumulative seconds."""
    stats = pstats.Stats(str(path))
    wanted = {("shards.py", "merge_parts"): "merge_parts, in all",
              ("parts.py", "check_files"): "checking the files' sha256",
              ("part_rows.py", "read"): "reading the parts' summaries and lengths",
              ("writes.py", "save_render_spec"): "the store's single write (Specs.save)",
              ("part_rows.py", "insert"): "  of which the rows, copied by INSERT ... SELECT",
              ("part_rows.py", "insert_summaries"): "  of which the summaries",
              ("part_rows.py", "length_chunk_rows"): "  of which the length arrays"}
    found = {(Path(file).name, name): seconds for (file, _, name), (_, _, _, seconds, _)
             in stats.stats.items()  # type: ignore[attr-defined]
             if (Path(file).name, name) in wanted}
    print(f"    where a merge's time goes (one more merge under cProfile, slower by its overhead; {path}):")
    for key, what in wanted.items():
        if key in found:
            print(f"      {what}: {found[key]:.2f} s")


def merge_store(folder: Path, entries: int) -> Path:
    """A store of about ``entries`` base entries, built from scripts/scale_data.py's data in seconds."""
    store = folder / "merge.db"
    build(generate_scale(folder, entries), store)
    return store


def paper(per_entry: float, merge_rate: float, part_bytes: float) -> list[tuple[str, str]]:
    """1B entries on NODES x CORES cores, from the measured per-entry render cost (one core), the
    merge's rows/s and the parts' bytes per entry."""
    entries, cores = 1_000_000_000, NODES * CORES
    render_s = entries * per_entry / cores
    merge_s = entries / merge_rate
    return [
        ("render, 1B entries on one core", f"{entries * per_entry / 3600:,.0f} h"),
        (f"render, {NODES} nodes x {CORES} cores ({cores:,} shards, linear)", f"{render_s / 60:,.1f} min"),
        ("parts written to shared storage", f"{entries * part_bytes / 1e9:,.0f} GB"),
        ("parts read by the merge, at its rate (one process)", f"{merge_rate * part_bytes / 1e6:,.0f} MB/s"),
        ("merge + the store's single write (one process)", f"{merge_s / 60:,.1f} min"),
        ("total, render then merge", f"{(render_s + merge_s) / 60:,.1f} min"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=30_000, help="entries rendered by (a), (b), (c)")
    parser.add_argument("--merge-entries", type=int, default=2_000_000, help="base entries of the merge's parts (d)")
    parser.add_argument("--merge-shards", type=int, default=16, help="parts the merge (d) reads")
    parser.add_argument("--rounds", type=int, default=3, help="times each figure is taken (medians printed)")
    parser.add_argument("--no-ray", action="store_true", help="leave out (c) even when ray is installed")
    parser.add_argument("--profile", type=Path, help="profile one more merge (d), its cProfile stats written here")
    args = parser.parse_args()
    work = scratch_folder("dataidx-shards-")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    store = built_store(work / "render", args.entries)
    with closing(sqlite3.connect(store)) as connection:
        entries = connection.execute("SELECT count(*) FROM base_entries").fetchone()[0]
    tokenizer = load_tokenizer(TOKENIZER)  # transformers imported before any figure: the serial render's first too
    started = None if args.no_ray else ray_start()
    try:
        seconds = render_rounds(store, args.rounds, started is not None)
    finally:
        if started is not None:
            ray_stop()
    serial = statistics.median(wall for wall, _ in seconds["serial"])
    cpu = {way: f"{statistics.median(used for _, used in runs):.2f}" if way != "ray" else "-"
           for way, runs in seconds.items()}
    print(f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} at the end), python "
          f"{sys.version.split()[0]}; {entries:,} entries of scripts/bench.py's data, data/demo_tokenizer, chatml, "
          f"cutoff {CUTOFF}; median of {args.rounds} rounds, in turns")
    lines = [("(a) serial render, 1 process", f"{serial:.2f}", cpu["serial"], f"{entries / serial:,.0f}", "1.00x")]
    for way, label in (("local", "(b) 2 shards, --runner local, 2 processes, + merge"),
                       ("ray", "(c) 2 shards, --runner ray (local cluster), + merge")):
        if way in seconds:
            median = statistics.median(wall for wall, _ in seconds[way])
            lines.append((label, f"{median:.2f}", cpu[way], f"{entries / median:,.0f}", f"{serial / median:.2f}x"))
    print_table(("render", "seconds", "CPU s", "entries/s", "vs serial"), lines)
    print(f"(c) ray: cluster start-up {started:.2f} s, not counted above" if started is not None else
          "(c) ray is not installed (pip install ray): --runner ray not measured" if not args.no_ray else
          "(c) ray left out (--no-ray)")

    merge = merge_store(work / "merge", args.merge_entries)
    parts = work / "merge" / "parts"
    merged, part_bytes = synthetic_parts(merge, parts, args.merge_shards, tokenizer)
    merge_s = statistics.median(merge_rounds(merge, parts, args.rounds, tokenizer))
    rate = merged / merge_s
    print(f"\n(d) merge_parts of {merged:,} entries' parts ({args.merge_shards} parts, {part_bytes / merged:.1f} bytes "
          f"an entry; tokenizer loaded beforehand): {merge_s:.2f} s, {rate:,.0f} rows/s into SQLite")
    if args.profile is not None:
        profiled_merge(merge, parts, tokenizer, args.profile)
        print_profile(args.profile)
    print(f"\n(e) on paper: {serial / entries * 1e6:.0f} us an entry on one core, merge at {rate:,.0f} rows/s")
    print_table(("1B entries", "figure"), paper(serial / entries, rate, part_bytes / merged))


if __name__ == "__main__":
    main()

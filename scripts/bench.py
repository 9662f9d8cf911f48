"""Benchmark dataidx against a LLaMA-Factory v1-style DataEngine, side by side, in one run.

The v1-style engine works the way LLaMA-Factory v1 (ff6d4d12) does: load every dataset, convert
every row with ``ds[i]`` to expand the supervised turns into a Python list of
``(dataset, row, cut)``, resample with ``random.choices``, and convert again on every fetch.
It uses dataidx's converters, which produce v1's samples exactly (tests/test_golden.py).

    python scripts/bench.py                        # generated data: 100k alpaca + 25k sharegpt rows
    python scripts/bench.py --alpaca 1000000 --sharegpt 250000
    python scripts/bench.py --config data/demo_sft.yaml
    python scripts/bench.py --tool-calls --alpaca 10000 --sharegpt 40000 --main-only   # multi-turn-heavy
    python scripts/bench.py --check                # default size, main table, against docs/performance.md

LLaMA-Factory's own engine runs too when installed (optional; its PyPI release predates v1's
per-turn expansion, so its start-up skips the conversion pass):
    pip install --no-deps llamafactory omegaconf antlr4-python3-runtime==4.9.3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_balance
import bench_media
import bench_merges
import bench_orders
from bench_common import (
    ROUNDS_VARIABLE,
    PrefetchedDataset,
    generate,
    generate_tool_calls,
    loader_run,
    print_table,
    rates,
    repeats,
)
from bench_render import RATIO_HEADER, render_ratio_table, render_table
from bench_tokens import tokens_table
from scratch import scratch_folder


class V1StyleEngine:
    """LLaMA-Factory v1's DataEngine, reduced to its data path (load, index, convert on fetch)."""

    def __init__(self, config_path: str) -> None:
        import logging

        from dataidx.config import load_config
        from dataidx.convert import converters, cuts
        from dataidx.sources import load

        # v1 logs each message it drops; that logger is silenced here, so a dataset with drops
        # does not time the terminal (in v1's favour: it skips that cost; dataidx counts them at build)
        logging.getLogger("dataidx.convert.registry").setLevel(logging.ERROR)

        self.datasets: dict[str, Any] = {}
        self.converters: dict[str, Any] = {}
        self.index: list[tuple[str, int, int | None]] = []
        for spec in load_config(config_path).datasets:
            dataset = load(spec).dataset
            convert = converters.get(spec.converter or "none").func
            self.datasets[spec.name], self.converters[spec.name] = dataset, convert
            index = [(spec.name, i, cut) for i in range(len(dataset)) for cut in cuts(convert(dataset[i]))]
            if spec.size is not None:
                index = random.choices(index, k=spec.size)
            if spec.weight is not None:
                index = random.choices(index, k=int(len(index) * spec.weight))
            self.index.extend(index)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int | list[int]) -> Any:
        if isinstance(i, list):
            return [self[j] for j in i]
        name, row, cut = self.index[i]
        sample = self.converters[name](self.datasets[name][row])
        if cut is not None:
            sample = {**sample, "messages": sample["messages"][:cut]}
        return {"_dataset_name": name, **sample}


def next_fit(lengths: list[int], capacity: int) -> int:
    """LLaMA-Factory v1's dynamic_padding_free: fill packs in the (shuffled) order given."""
    packs, room = 0, 0
    for length in lengths:
        if length > room:
            packs, room = packs + 1, capacity
        room -= length
    return packs


def windowed_first_fit_decreasing(lengths: list[int], capacity: int, window: int = 1000) -> int:
    """LLaMA-Factory v0's greedy_knapsack: first-fit-decreasing inside windows of 1000 samples."""
    packs = 0
    for start in range(0, len(lengths), window):
        rooms: list[int] = []
        for length in sorted(lengths[start : start + window], reverse=True):
            for number, room in enumerate(rooms):
                if room >= length:
                    rooms[number] -= length
                    break
            else:
                rooms.append(capacity - length)
        packs += len(rooms)
    return packs


def packing_table(count: int, capacity: int = 4096) -> list[tuple[str, ...]]:
    """Packs/s and fill of each planner on the same lognormal lengths (median ~500 tokens)."""
    import numpy as np

    from dataidx.pack import plan_packs

    lengths = np.clip(np.random.default_rng(0).lognormal(6.2, 0.9, count).astype(int), 16, capacity)
    shuffled = lengths.tolist()
    random.Random(0).shuffle(shuffled)
    total = int(lengths.sum())
    lines = []
    for name, run in (
        ("dataidx best-fit-decreasing", lambda: len(plan_packs(lengths, capacity, seed=0).sizes)),
        ("v1 next-fit on shuffled order", lambda: next_fit(shuffled, capacity)),
        ("v0 first-fit-decreasing, windows of 1000", lambda: windowed_first_fit_decreasing(shuffled, capacity)),
    ):
        started = time.perf_counter()
        packs = run()
        seconds = time.perf_counter() - started
        lines.append((name, f"{count / seconds:,.0f}", f"{packs / seconds:,.0f}", f"{seconds:.2f}",
                      f"{100 * total / (packs * capacity):.2f}%"))
    return lines


def stored_plan_seconds(store: Path, capacity: int = 4096) -> tuple[float, float, int]:
    """``dataidx pack`` over every position of a big store, with lognormal lengths written as a
    spec straight into a copy (rendering 1.9M entries here would take minutes): SQL in and out."""
    import shutil
    import sqlite3

    import numpy as np

    from dataidx.pack import pack_store

    copy = store.with_name("packed.db")
    shutil.copyfile(store, copy)
    with sqlite3.connect(copy) as connection:
        first, last = connection.execute("SELECT min(id), max(id) FROM base_entries").fetchone()
        lengths = np.clip(np.random.default_rng(0).lognormal(6.2, 0.9, last - first + 1).astype(int), 16, capacity)
        connection.execute(
            "INSERT INTO render_specs (id, name, fingerprint, tokenizer, tokenizer_sha256, template, template_text, "
            "cutoff, truncation, entries, kept, dataidx_version, created_at, seconds) VALUES "
            "(1, 'bench', '', '', '', 'chatml', '', ?, 'drop', ?, ?, '', '', 0)",
            (capacity, len(lengths), len(lengths)))
        connection.executemany(
            "INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, status, detail) "
            "VALUES (1, ?, ?, ?, ?, 'ok', NULL)",
            ((first + i, int(n), int(n) // 2, int(n)) for i, n in enumerate(lengths)))
    summary = pack_store(copy, "bench", capacity=capacity, seed=0)
    return summary.seconds, summary.fill, summary.packs


def drops_table(work: Path, conversations: int, fetches: int) -> list[tuple[str, ...]]:
    """Random fetches on sharegpt rows that each lost a message at build time (an unknown role tag,
    counted by the build) beside the same rows without it: the same speed, and no log lines."""
    import logging

    from dataidx import DataEngine
    from dataidx.index import build

    folder = work / "drops"
    folder.mkdir()
    lines = []
    for label, extra in (("clean rows", []),
                         ("every row lost a message at build", [{"from": "narrator", "value": "x"}])):
        rng = random.Random(0)
        data = folder / f"{len(lines)}.jsonl"
        with data.open("w") as out:
            for _ in range(conversations):
                turns = [{"from": "human", "value": "hello " * rng.randint(1, 20)}, *extra,
                         {"from": "gpt", "value": "fine " * rng.randint(1, 40)}]
                out.write(json.dumps({"conversations": turns}) + "\n")
        config = folder / f"{len(lines)}.yaml"
        config.write_text(f"chat:\n  path: {data}\n  source: local\n  converter: sharegpt\n")
        build(config, folder / f"{len(lines)}.db")
        engine = DataEngine(folder / f"{len(lines)}.db")
        indices = [rng.randrange(len(engine)) for _ in range(fetches)]
        logged = []
        handler = logging.Handler()
        handler.emit = logged.append
        logging.getLogger("dataidx").addHandler(handler)
        try:
            started = time.perf_counter()
            for index in indices:
                engine[index]
            seconds = time.perf_counter() - started
        finally:
            logging.getLogger("dataidx").removeHandler(handler)
        lines.append((label, f"{fetches / seconds:,.0f}", f"{len(logged):,}"))
    return lines


#: Families whose real templates the family figures render (tests/conformance/families).
FAMILIES = ("qwen3", "llama3_1", "gemma3", "phi4", "gpt_oss")


def family_table(work: Path, rows: int, llamafactory: Path | None) -> tuple[int, list[tuple[str, ...]]]:
    """Entries/s through real families' own Jinja templates, with tokenizers built like theirs
    (tests/conformance): dataidx's Renderer and v1's in one process on the same entries (v1's own
    Renderer when ``llamafactory`` is its source, else its rule over ``apply_chat_template``),
    and ``dataidx render`` at default jobs next to the built-in ChatML on the same tokenizer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conformance import build_tokenizer, template_text
    from tests.conformance.v1 import v1_render, v1_renderer_class

    from dataidx.index import build
    from dataidx.read import EntryReader
    from dataidx.render import CHATML, Renderer, RenderRequest, chat_messages, load_tokenizer, render_store

    folder = work / "families"
    folder.mkdir()
    store = folder / "families.db"
    build(generate(folder, rows, rows // 4), store)
    reader = EntryReader(store)
    triples = list(reader.entries_between(1, 2**62))
    step = max(1, len(triples) // 2000)
    samples = [(reader.sample(dataset_id, row, cut), cut is not None) for entry, dataset_id, row, cut in triples
               if entry % step == 0][:2000]
    v1_class = v1_renderer_class(llamafactory) if llamafactory is not None else None
    lines, chatml_rate = [], None
    for slug in ("chatml", *FAMILIES):
        tokenizer_path = build_tokenizer("qwen2_5" if slug == "chatml" else slug, folder / slug)
        tokenizer = load_tokenizer(tokenizer_path)
        text = CHATML if slug == "chatml" else template_text(slug)
        renderer = Renderer(tokenizer, text, cutoff=4096)
        renderer.render_many(samples[:50])  # warm: compiled template, tokenizer caches
        started = time.perf_counter()
        for start in range(0, len(samples), 256):
            renderer.render_many(samples[start:start + 256])
        ours = len(samples) / (time.perf_counter() - started)
        started = time.perf_counter()
        if v1_class is not None:
            tokenizer.chat_template = text
            v1 = v1_class(tokenizer)
            for sample, _ in samples:
                v1_render(v1, sample)
        else:
            for sample, _ in samples:
                try:
                    messages = chat_messages(sample["messages"])
                    tokenizer(tokenizer.apply_chat_template(messages, chat_template=text, tokenize=False),
                              add_special_tokens=False)
                    tokenizer(tokenizer.apply_chat_template(messages[:-1], chat_template=text, tokenize=False,
                                                            add_generation_prompt=True), add_special_tokens=False)
                except Exception:  # an entry v1 refuses costs what it cost
                    pass
        theirs = len(samples) / (time.perf_counter() - started)
        summary = render_store(RenderRequest(store, tokenizer_path, cutoff=4096, name=slug,
                               template="chatml" if slug == "chatml" else None))
        rate = summary.entries / summary.seconds
        chatml_rate = chatml_rate or rate
        lines.append((slug, f"{ours:,.0f}", f"{theirs:,.0f}", f"{ours / theirs:.2f}", f"{rate:,.0f}",
                      f"{rate / chatml_rate:.2f}", f"{summary.kept / summary.entries:.0%}"))
    return len(triples), lines


def llamafactory_engine(config: str) -> tuple[Any, float] | None:
    """LLaMA-Factory's own v1 DataEngine from the PyPI package, when it is installed."""
    try:
        from llamafactory.v1.core.data_engine import DataEngine as LlamaFactoryEngine
    except ImportError:
        return None
    started = time.perf_counter()
    engine = LlamaFactoryEngine(config)
    return engine, time.perf_counter() - started


def fresh_loader(engine: str, source: str, count: int) -> tuple[float, float]:
    """:func:`loader_run` in a new process that opens one engine (``dataidx`` on a store, ``v1``
    or ``lf`` on a config) and iterates its DataLoader, as a training run does: the workers fork
    from a process that has fetched nothing. Forked from this one instead, after its fetch
    passes, every engine's workers write into its fragmented heap's pages (copies on write),
    which costs a fast fetch the most (here: dataidx 12.5k -> 10.2k samples/s)."""
    out = subprocess.run([sys.executable, __file__, "--loader-child", engine, source, str(count)],
                         capture_output=True, text=True, check=True)
    rate, growth = json.loads(out.stdout.splitlines()[-1])
    return rate, growth


def fresh_open(store: Path) -> float:
    """Seconds from StoreReader(...) to the first sample in a new process, imports excluded."""
    script = (
        "import time, json\nfrom dataidx.read import StoreReader\n"
        f"t = time.perf_counter(); r = StoreReader({str(store)!r}); r.get(0)\n"
        "print(json.dumps(time.perf_counter() - t))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return float(out.stdout)


def wall(*command: str, runs: int = 1) -> float:
    """Seconds a command takes in a fresh process; the median of ``runs`` runs (a shared VM moves
    single short runs by up to 40%)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


#: Where ``--check`` reads its ranges: the fenced ``bench-check`` block.
PERFORMANCE_MD = Path(__file__).resolve().parents[1] / "docs" / "performance.md"


class Range(NamedTuple):
    better: str  # "higher" or "lower"
    low: float
    high: float
    what: str


def check_ranges(doc: Path) -> dict[str, Range]:
    """The ranges of the ```` ```bench-check ```` block of ``doc``: one figure a line, ``key better
    low high what it is``; ``#`` starts a comment."""
    found = re.search(r"^```bench-check\n(.*?)^```", doc.read_text(), re.S | re.M)
    if not found:
        raise SystemExit(f"{doc}: no ```bench-check block")
    ranges = {}
    for number, line in enumerate(found.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, better, low, high, *what = line.split()
        if better not in ("higher", "lower") or float(low) > float(high):
            raise SystemExit(f"{doc}: bench-check line {number}: "
                             f"expected 'key higher|lower low high what', got {line!r}")
        ranges[key] = Range(better, float(low), float(high), " ".join(what))
    return ranges


def verdict(value: float, limits: Range) -> str:
    """``ok`` inside the range; ``REGRESSION`` past it on the worse side; ``better`` past it on
    the other (the range is the noise: a change moved the figure, and the doc should follow)."""
    worse = value < limits.low if limits.better == "higher" else value > limits.high
    better = value > limits.high if limits.better == "higher" else value < limits.low
    return "REGRESSION" if worse else "better than the range: record it" if better else "ok"


def regressions(figures: dict[str, float], ranges: dict[str, Range]) -> list[str]:
    return [key for key, limits in ranges.items() if key in figures and verdict(figures[key], limits) == "REGRESSION"]


def best_of(ranges: dict[str, Range], key: str, first: float, second: float) -> float:
    """The more favourable of two runs' figures: what the code can do when the machine lets it."""
    if key not in ranges:
        return first
    return max(first, second) if ranges[key].better == "higher" else min(first, second)


def report_check(figures: dict[str, float], ranges: dict[str, Range]) -> int:
    """Print each figure beside its range and verdict; 1 if any regressed (or is missing), else 0."""
    print(f"\ncheck against {PERFORMANCE_MD.name} (ratios are v1-style / dataidx for times, dataidx / v1-style "
          "for rates, so a slower machine moves both sides)")
    lines = []
    for key, limits in ranges.items():
        if key not in figures:
            lines.append((key, "missing", f"{limits.low:g}-{limits.high:g}", "REGRESSION: not measured", limits.what))
            continue
        said = verdict(figures[key], limits)
        lines.append((key, f"{figures[key]:.4g}", f"{limits.low:g}-{limits.high:g} ({limits.better} is better)", said,
                      limits.what))
    print_table(("figure", "measured", "range", "verdict", "what"), lines, left=(0, 3, 4))
    regressed = [line[0] for line in lines if line[3].startswith("REGRESSION")]
    print(f"\nregression: {', '.join(regressed)}" if regressed else "\nno regression")
    return 1 if regressed else 0


def main_table(args: argparse.Namespace, config: str, work: Path) -> tuple[list[tuple[str, ...]], dict[str, float],
                                                                          Path, int]:
    """The side-by-side table of start-up, fetches, loader, memory, store size, info and mix; its
    figures for ``--check`` (ratios against the v1-style engine of this run, and a few figures
    no machine moves), the store built and its entries."""
    from dataidx import DataEngine
    from dataidx.index import add_mixture, build

    work.mkdir(parents=True)
    store = work / "bench.db"
    # Start-up as a user meets it: a fresh process, imports included, caches warm.
    dataidx = str(Path(sys.executable).with_name("dataidx"))
    build_s = wall(dataidx, "build", config, "-o", str(store), "-q", runs=repeats(3))
    v1_s = wall(sys.executable, __file__, "--startup", "v1", config, runs=3 if args.check else 1)
    has_lf = importlib.util.find_spec("llamafactory") is not None
    lf_s = wall(sys.executable, __file__, "--startup", "lf", config) if has_lf else None
    started = time.perf_counter()
    build(config, work / "in-process.db")
    build_in_process_s = time.perf_counter() - started
    started = time.perf_counter()
    v1 = V1StyleEngine(config)
    v1_in_process_s = time.perf_counter() - started
    lf = llamafactory_engine(config)

    engine = DataEngine(store)
    rng = random.Random(1)
    indices = [rng.randrange(len(engine)) for _ in range(min(args.fetches, 10 * len(engine)))]
    lf_indices = [i % len(lf[0]) for i in indices] if lf else []
    table: list[tuple[str, ...]] = []
    figures: dict[str, float] = {}

    def row(label: str, ours: float, v1_figure: float | None, lf_figure: float | None, fmt: str,
            higher_is_better: bool, key: str | None = None, absolute: bool = False) -> None:
        if key:  # what --check compares: the ratio to v1-style (higher is better), or the figure itself
            figures[key] = ours if absolute else (ours / v1_figure if higher_is_better else v1_figure / ours)
        def ratio(other: float | None) -> str:
            if other is None or not ours or not other:
                return ""
            return f"{(ours / other if higher_is_better else other / ours):.2f}x"
        table.append((label, format(ours, fmt), "-" if v1_figure is None else format(v1_figure, fmt), ratio(v1_figure),
                      "-" if lf_figure is None else format(lf_figure, fmt), ratio(lf_figure)))

    lf_s = lf_s if lf else None
    row("entries", len(engine), len(v1), len(lf[0]) if lf else None, ",", True)
    row("start-up, fresh process (s): build once (median of 3) / init every run", build_s, v1_s, lf_s, ".2f", False,
        "startup_fresh")
    row("start-up, in process after imports (s)", build_in_process_s, v1_in_process_s, lf[1] if lf else None,
        ".2f", False, "startup_in_process")
    row("open -> first sample, fresh process (s)", fresh_open(store), v1_s, lf_s, ".4f", False, "open_s", True)
    for label, batch, key in (("engine[i], random (samples/s)", 1, "fetch_one"),
                              ("engine[list of 256] (samples/s)", 256, "fetch_256")):
        contenders = [(engine, indices), (v1, indices)] + ([(lf[0], lf_indices)] if lf else [])
        found = rates(contenders, batch)
        row(label, found[0], found[1], found[2] if lf else None, ",.0f", True, key)
    # fresh processes, best of 3, the engines taking turns: a loader pass is the figure a busy
    # minute moves most (single passes of one engine differ by 40% on a shared VM)
    (ours_rate, ours_growth), (v1_rate, v1_growth), (lf_rate, lf_growth) = (0.0, 0.0), (0.0, 0.0), (None, None)
    for _ in range(repeats(3)):
        ours_rate, ours_growth = max((ours_rate, ours_growth), fresh_loader("dataidx", str(store), args.loader))
        v1_rate, v1_growth = max((v1_rate, v1_growth), fresh_loader("v1", config, args.loader))
        if lf:
            lf_rate, lf_growth = max((lf_rate or 0.0, lf_growth or 0.0), fresh_loader("lf", config, args.loader))
    row("DataLoader, 2 workers, batch 32 (samples/s)", ours_rate, v1_rate, lf_rate, ",.0f", True, "loader")
    prefetched = PrefetchedDataset(engine[: min(len(engine), 5000)], len(engine))
    ceiling, _ = loader_run(prefetched, args.loader)
    row("  ceiling: same loader over prefetched samples", ceiling, v1_rate, None, ",.0f", True)
    row("private memory growth per worker (MiB)", ours_growth, v1_growth, lf_growth, ".1f", False, "worker_mib", True)
    row("store size (bytes/entry)", store.stat().st_size / len(engine), None, None, ".1f", False, "store_bytes", True)
    row("`dataidx info` wall (s)", wall(dataidx, "info", str(store), runs=repeats(3)),
        None, None, ".2f", False, "info_s", True)
    weighted = work / "weighted.yaml"
    weighted.write_text(Path(config).read_text().replace("converter: alpaca", "converter: alpaca\n  weight: 0.5"))
    started = time.perf_counter()
    add_mixture(store, weighted, "weighted", seed=1)
    row("`dataidx mix` a new mixture (s)", time.perf_counter() - started, v1_s, lf_s, ".2f", False, "mix")
    return table, figures, store, len(engine)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="an existing v1 YAML instead of generated data")
    parser.add_argument("--alpaca", type=int, default=100_000)
    parser.add_argument("--sharegpt", type=int, default=25_000)
    parser.add_argument("--tool-calls", action="store_true", help="generate multi-turn-heavy sharegpt instead: "
                        "function calls (a tenth invalid, dropped), observations, tools on half the rows")
    parser.add_argument("--main-only", action="store_true", help="only the main table (start-up, fetch, loader)")
    parser.add_argument("--without-sections", action="store_true", help="the main table and the figures over its "
                        "store (packing, dropped messages, rendering), none of the sections a --NAME-only flag "
                        "names (the *-only flags combine: each section named, in turn)")
    parser.add_argument("--fetches", type=int, default=20_000, help="random fetches per access pattern")
    parser.add_argument("--loader", type=int, default=100_000, help="samples through the DataLoader")
    parser.add_argument("--pack", type=int, default=1_000_000, help="lengths for the packing comparison")
    parser.add_argument("--render", type=int, default=40_000, help="alpaca rows (plus a quarter as many "
                        "sharegpt conversations) for the rendering figures")
    parser.add_argument("--check", action="store_true", help="run the default size, the main table only, and "
                        "compare each figure with the ranges in docs/performance.md; exit 1 on a regression")
    parser.add_argument("--families", type=int, default=10_000, help="alpaca rows (plus a quarter as many "
                        "sharegpt conversations) for the figures of real families' templates")
    parser.add_argument("--families-only", action="store_true", help="only the figures of real families' templates")
    parser.add_argument("--render-rows", type=int, default=10_000, help="alpaca rows (plus a quarter as many "
                        "sharegpt conversations) for rendering against its ceiling")
    parser.add_argument("--render-only", action="store_true", help="only rendering against its ceiling (one "
                        "encode_batch pass over the same texts)")
    parser.add_argument("--llamafactory", type=Path, help="LLaMA-Factory's src (ff6d4d12): time v1's own Renderer")
    parser.add_argument("--tokens-rows", type=int, default=56_000, help="alpaca rows (plus a quarter as many "
                        "sharegpt conversations) for the stored-tokens figures: the default gives ~105k entries, "
                        "past the 100k the equality check asks for")
    parser.add_argument("--tokens-fetches", type=int, default=5_000, help="random fetches per access pattern, "
                        "stored tokens and re-rendering alike")
    parser.add_argument("--tokens-loader", type=int, default=30_000, help="samples through the DataLoader, "
                        "stored tokens and re-rendering alike")
    parser.add_argument("--tokens-only", action="store_true", help="only the stored-tokens figures")
    parser.add_argument("--orders-positions", type=int, default=20_000_000, help="positions of the mixture the "
                        "training-order figures resume in (its entries repeated)")
    parser.add_argument("--orders-only", action="store_true", help="only the training-order figures")
    parser.add_argument("--merges-conversations", type=int, default=25_000, help="multi-turn sharegpt "
                        "conversations of the cut-merge figures")
    parser.add_argument("--merges-scale", type=Path, help="a store with stored tokens on which to time planning "
                        "with --merge-cuts (default: the cut-merge store itself)")
    parser.add_argument("--merges-spec", default="qwen2_5", help="the spec of --merges-scale to plan with")
    parser.add_argument("--merges-only", action="store_true", help="only the cut-merge figures")
    parser.add_argument("--media-images", type=int, default=200, help="generated JPEGs (beside the 3 demo images) "
                        "for the figures of image token counts from headers against the image processor")
    parser.add_argument("--media-only", action="store_true", help="only the image token count figures")
    parser.add_argument("--balance-entries", type=int, default=1_000_000, help="lognormal lengths (cutoff 32k) of "
                        "the compute-balance figures, 8 ranks")
    parser.add_argument("--balance-only", action="store_true", help="only the compute-balance figures (issue 56)")
    parser.add_argument("--rounds", type=int, help="take every best-of/median-of figure this many times "
                        "instead (1: a quick run that checks the script, not figures to compare)")
    parser.add_argument("--startup", nargs=2, metavar=("ENGINE", "CONFIG"), help=argparse.SUPPRESS)
    parser.add_argument("--loader-child", nargs=3, metavar=("ENGINE", "SOURCE", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check and (args.config or args.tool_calls or (args.alpaca, args.sharegpt) != (100_000, 25_000)):
        parser.error("--check runs the default size (its ranges were measured there): leave out --config, "
                     "--tool-calls, --alpaca and --sharegpt")
    if args.rounds is not None:
        if args.check or args.rounds < 1:
            parser.error("--rounds must be 1 or more, and --check takes its figures its own way")
        os.environ[ROUNDS_VARIABLE] = str(args.rounds)
    if args.loader_child:  # a child process: one engine's DataLoader pass, printed as JSON
        engine_name, source, count = args.loader_child
        if engine_name == "dataidx":
            from dataidx import DataEngine

            child: Any = DataEngine(source)
        else:
            child = V1StyleEngine(source) if engine_name == "v1" else cast(Any, llamafactory_engine(source))[0]
        print(json.dumps(loader_run(child, int(count))))
        return
    if args.startup:  # a child process timed by the parent: build one engine and exit
        engine_name, startup_config = args.startup
        V1StyleEngine(startup_config) if engine_name == "v1" else llamafactory_engine(startup_config)
        return

    # --tokens-only, --merges-only, ...: those sections alone (several flags: each of them, in turn).
    if only := [section for name, section in SECTIONS.items() if getattr(args, f"{name}_only")]:
        work = scratch_folder("dataidx-bench-")
        for section in only:
            section(work, args)
        return
    # Imported before any timing: each engine's figures exclude its libraries' import time.
    from dataidx.config import load_config
    from dataidx.sources import load
    from dataidx.store.sqlite.files import create_store

    create_store(scratch_folder("dataidx-warm-") / "warm.db").dispose()  # warms the schema script and SQLAlchemy

    work = scratch_folder("dataidx-bench-")
    config = args.config or str((generate_tool_calls if args.tool_calls else generate)(work, args.alpaca,
                                                                                      args.sharegpt))
    for spec in load_config(config).datasets:  # warm the HF cache: every engine then loads warm
        load(spec)

    table, figures, store, entries_in_store = main_table(args, config, work / "first")
    print(f"data: {config}  ({os.cpu_count()} cores, python {sys.version.split()[0]})")
    print("v1-style: LLaMA-Factory v1 (ff6d4d12) data path in this script; "
          f"LF: llamafactory {_llamafactory_version()} from PyPI (no per-turn expansion)")
    print_table(("figure", "dataidx", "v1-style", "ratio", "LF", "ratio"), table)
    if args.check:
        ranges = check_ranges(PERFORMANCE_MD)
        if regressions(figures, ranges):  # a shared VM: a regression must show in a second run too
            print("\nout of range: measuring again (a busy minute of a shared machine moves single runs)")
            table, again, _, _ = main_table(args, config, work / "second")
            print_table(("figure", "dataidx", "v1-style", "ratio", "LF", "ratio"), table)
            figures = {key: best_of(ranges, key, figures[key], again[key]) for key in figures}
        sys.exit(report_check(figures, ranges))
    if args.main_only:
        return

    print(f"\npacking plans: {args.pack:,} lognormal lengths (16-4096 tokens), capacity 4096")
    header = ("planner", "entries/s", "packs/s", "seconds", "fill")
    print_table(header, packing_table(args.pack))
    seconds, fill, packs = stored_plan_seconds(store)
    print(f"dataidx pack, stored plan over all {entries_in_store:,} positions of the store above (read lengths, plan, "
          f"write members): {seconds:.2f} s, {packs / seconds:,.0f} packs/s, {fill:.2%} full")

    dropping = 2 * args.sharegpt  # 50,000 at the default size
    print(f"\nfetching rows whose messages the build dropped: {args.fetches:,} random engine[i] on {dropping:,} "
          "sharegpt rows")
    print_table(("rows", "samples/s", "log lines"), drops_table(work, dropping, args.fetches))

    entries, lines, packed = render_table(work, args.render)
    print(f"\nrendering: {entries:,} base entries (alpaca + multi-turn sharegpt), byte-level BPE of 8k trained here, "
          "chatml, cutoff 4096")
    print_table(("renderer", "entries/s", "seconds"), lines)
    print(packed)
    if args.without_sections:
        return
    for section in SECTIONS.values():
        section(work, args)


def print_render_ratio(work: Path, args: argparse.Namespace) -> None:
    entries, lines = render_ratio_table(work, args.render_rows)
    print(f"\nrendering against its ceiling: {entries:,} base entries (alpaca + multi-turn sharegpt), cutoff 4096, "
          f"{os.cpu_count()} processes; ceiling: the tokenizer's encode_batch over each entry's whole text, once "
          "(all threads); best of 2, in turns")
    print_table(RATIO_HEADER, lines)


def print_tokens(work: Path, args: argparse.Namespace) -> None:
    entries, lines, notes = tokens_table(work, args.tokens_rows, args.tokens_fetches, args.tokens_loader)
    print(f"\nstored tokens (render --store-tokens) against rendering on every fetch: {entries:,} training entries "
          "of one store, byte-level BPE of 8k trained here, chatml, cutoff 4096; rates best of 3, in turns")
    print_table(("figure", "tokens", "re-render", "ratio", "target", ""), lines)
    for note in notes:
        print(note)


def print_orders(work: Path, args: argparse.Namespace) -> None:
    positions, lines = bench_orders.orders_table(work, args.orders_positions)
    print(f"\ntraining orders: a mixture of {positions:,} positions, {bench_orders.WORLD} ranks, global batch "
          f"{bench_orders.GLOBAL_BATCH:,} (rank {bench_orders.RANK} timed); medians")
    print_table(("figure", "dataidx", "DistributedSampler", "ratio", "target", ""), lines)


def print_merges(work: Path, args: argparse.Namespace) -> None:
    entries, lines = bench_merges.merges_table(work, args.merges_conversations)
    print(f"\ncut merges (pack --merge-cuts): {entries:,} cut entries of {args.merges_conversations:,} multi-turn "
          f"conversations, capacity {bench_merges.CAPACITY:,}, steps per epoch at {bench_merges.GLOBAL_BATCH} packs "
          "a step; tokenizers built like each family's (tests/conformance)")
    print_table(("template", "mode", "conversations merged", "kept as cuts (why)", "tokens as cuts", "tokens merged",
                 "fewer", "steps as cuts", "steps merged"), lines, left=(0, 1, 2, 3))
    store = args.merges_scale or work / "merges" / "merges.db"
    spec = args.merges_spec if args.merges_scale else "qwen2_5"
    print(f"\nplanning with --merge-cuts on {store} (spec {spec}); fresh processes, best of 2")
    print_table(("command", "seconds", "vs pack", "what it said"), bench_merges.planning_table(store, spec),
                left=(0, 3))


def print_families(work: Path, args: argparse.Namespace) -> None:
    entries, lines = family_table(work, args.families, args.llamafactory)
    v1 = "v1's own Renderer" if args.llamafactory else "v1's rule over apply_chat_template"
    print(f"\nreal families' templates: 2,000 of {entries:,} base entries in one process (dataidx's Renderer in "
          f"batches of 256; {v1}, entry by entry), then dataidx render of all of them at default jobs; tokenizers "
          "built like each family's (tests/conformance); chatml is the built-in on qwen2_5's tokenizer")
    print_table(("template", "dataidx entries/s", "v1 entries/s", "ratio", "render entries/s", "vs chatml", "train"),
                lines)


def print_media(work: Path, args: argparse.Namespace) -> None:
    images, lines, said = bench_media.media_table(work, args.media_images)
    print(f"\nimage token counts (Qwen2-VL, issue 53): {images:,} JPEGs, from the header against running the image "
          "processor, per image; best of 5 and of 2 passes (not gated by --check)")
    print_table(("path", "images/s", "us/image", "ratio", "target", ""), lines)
    print(said)
    fetched = bench_media.fetch_table(work, args.llamafactory)
    if fetched is None:
        print("(serving multimodal entries: ../shared/data is not beside the repo, not timed)")
        return
    entries, lines = fetched
    print(f"\nserving multimodal entries (issue 53): the {entries} demo entries (Qwen2-VL-style processor, one or "
          "two 300x170 images each), one at a time; best of 3 passes")
    print_table(("path", "entries/s", "vs v1"), lines)


def print_balance(work: Path, args: argparse.Namespace) -> None:
    said, lines = bench_balance.balance_table(args.balance_entries, 32_768, 8, [1, 4])
    print(f"\ncompute-balanced pack orders (pack --balance compute, issue 56) beside today's shuffled plan, the same "
          f"packs: {said}")
    print_table(bench_balance.HEADER, lines, left=(0, 1))


#: The sections a full run prints after the main store's, in order; ``--NAME-only`` prints one alone.
SECTIONS: dict[str, Callable[[Path, argparse.Namespace], None]] = {
    "tokens": print_tokens, "orders": print_orders, "merges": print_merges, "families": print_families,
    "render": print_render_ratio, "media": print_media, "balance": print_balance,
}


def _llamafactory_version() -> str:
    try:
        from importlib.metadata import version

        return version("llamafactory")
    except Exception:
        return "(not installed)"


if __name__ == "__main__":
    main()

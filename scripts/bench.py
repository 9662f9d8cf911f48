"""Benchmark dataidx against a LLaMA-Factory v1-style DataEngine, side by side, in one run.

The v1-style engine works the way LLaMA-Factory v1 (ff6d4d12) does: load every dataset, convert
every row with ``ds[i]`` to expand the supervised turns into a Python list of
``(dataset, row, cut)``, resample with ``random.choices``, and convert again on every fetch.
It uses dataidx's converters, which produce v1's samples exactly (tests/test_golden.py).

    python scripts/bench.py                        # generated data: 100k alpaca + 25k sharegpt rows
    python scripts/bench.py --alpaca 1000000 --sharegpt 250000
    python scripts/bench.py --config data/demo_sft.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def generate(folder: Path, alpaca: int, sharegpt: int) -> Path:
    """Deterministic alpaca and multi-turn sharegpt files plus their v1 YAML."""
    rng = random.Random(0)
    words = "the of and a to in is you that it he was for on are as with his they at be this have from".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    with (folder / "alpaca.jsonl").open("w") as out:
        for i in range(alpaca):
            out.write(json.dumps({"instruction": text(12), "input": text(rng.randint(0, 8)), "output": text(40)}) + "\n")
    with (folder / "sharegpt.jsonl").open("w") as out:
        for i in range(sharegpt):
            turns = []
            for _ in range(rng.randint(1, 6)):
                turns += [{"from": "human", "value": text(10)}, {"from": "gpt", "value": text(30)}]
            out.write(json.dumps({"conversations": turns}) + "\n")
    config = folder / "bench.yaml"
    config.write_text(yaml.safe_dump({
        "alpaca": {"path": str(folder / "alpaca.jsonl"), "source": "local", "converter": "alpaca"},
        "sharegpt": {"path": str(folder / "sharegpt.jsonl"), "source": "local", "converter": "sharegpt"},
    }, sort_keys=False))
    return config


class V1StyleEngine:
    """LLaMA-Factory v1's DataEngine, reduced to its data path (load, index, convert on fetch)."""

    def __init__(self, config_path: str) -> None:
        from dataidx.config import load_config
        from dataidx.converters import converters
        from dataidx.expansion import cuts
        from dataidx.sources import load

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


def rate(engine: Any, indices: list, batch: int) -> float:
    """Samples per second fetching ``indices`` one by one (batch 1) or in lists of ``batch``."""
    started = time.perf_counter()
    if batch == 1:
        for i in indices:
            engine[i]
    else:
        for k in range(0, len(indices), batch):
            engine[indices[k : k + batch]]
    return len(indices) / (time.perf_counter() - started)


def loader_rate(engine: Any, count: int) -> float:
    from torch.utils.data import DataLoader, Subset

    subset = Subset(engine, list(range(min(count, len(engine)))))
    loader = DataLoader(subset, batch_size=32, shuffle=True, num_workers=2, collate_fn=list,
                        generator=__import__("torch").Generator().manual_seed(0))
    started = time.perf_counter()
    fetched = sum(len(batch) for batch in loader)
    return fetched / (time.perf_counter() - started)


def fresh_open(store: Path) -> float:
    """Seconds from StoreReader(...) to the first sample in a new process, imports excluded."""
    script = (
        "import time, json\nfrom dataidx.reader import StoreReader\n"
        f"t = time.perf_counter(); r = StoreReader({str(store)!r}); r.get(0)\n"
        "print(json.dumps(time.perf_counter() - t))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return float(out.stdout)


def wall(*command: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="an existing v1 YAML instead of generated data")
    parser.add_argument("--alpaca", type=int, default=100_000)
    parser.add_argument("--sharegpt", type=int, default=25_000)
    parser.add_argument("--fetches", type=int, default=20_000, help="random fetches per access pattern")
    parser.add_argument("--loader", type=int, default=100_000, help="samples through the DataLoader")
    args = parser.parse_args()

    from dataidx import DataEngine
    from dataidx.build import build
    from dataidx.config import load_config
    from dataidx.sources import load

    work = Path(tempfile.mkdtemp(prefix="dataidx-bench-"))
    config = args.config or str(generate(work, args.alpaca, args.sharegpt))
    for spec in load_config(config).datasets:  # warm the HF cache: both sides then load warm
        load(spec)

    store = work / "bench.db"
    started = time.perf_counter()
    build(config, store)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    v1 = V1StyleEngine(config)
    v1_s = time.perf_counter() - started

    engine = DataEngine(store)
    rng = random.Random(1)
    indices = [rng.randrange(len(engine)) for _ in range(min(args.fetches, 10 * len(engine)))]
    rows = [
        ("entries", f"{len(engine):,}", f"{len(v1):,}", ""),
        ("start-up: build once vs v1 init every run (s)", f"{build_s:.2f}", f"{v1_s:.2f}", f"{v1_s / build_s:.1f}x"),
    ]
    open_s = fresh_open(store)
    rows.append(("open -> first sample, fresh process (s)", f"{open_s:.4f}", f"{v1_s:.2f}", f"{v1_s / open_s:.0f}x"))
    for label, batch in (("engine[i], random (samples/s)", 1), ("engine[list of 256] (samples/s)", 256)):
        ours, theirs = rate(engine, indices, batch), rate(v1, indices, batch)
        rows.append((label, f"{ours:,.0f}", f"{theirs:,.0f}", f"{ours / theirs:.2f}x"))
    ours, theirs = loader_rate(engine, args.loader), loader_rate(v1, args.loader)
    rows.append(("DataLoader, 2 workers, batch 32 (samples/s)", f"{ours:,.0f}", f"{theirs:,.0f}", f"{ours / theirs:.2f}x"))
    rows.append(("store size (bytes/entry)", f"{store.stat().st_size / len(engine):.1f}", "-", ""))
    info_s = wall(str(Path(sys.executable).with_name("dataidx")), "info", str(store))
    rows.append(("`dataidx info` wall (s)", f"{info_s:.2f}", "-", ""))

    print(f"data: {config}  ({os.cpu_count()} cores)")
    widths = [max(len(r[i]) for r in rows + [("figure", "dataidx", "v1-style", "ratio")]) for i in range(4)]
    for row in [("figure", "dataidx", "v1-style", "ratio")] + rows:
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    main()

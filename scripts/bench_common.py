"""What more than one benchmark of scripts/ uses: bench.py's generated data, how many times a
figure is taken (``--rounds``), fetch rates and DataLoader passes, and the table printer.

Scripts import these from here, never from one another's entry point: bench.py imports its
sections (bench_render.py, bench_tokens.py, bench_orders.py, bench_merges.py), and nothing
imports bench.py.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scale_data import write_config


def _alpaca_rows(folder: Path, rows: int, rng: random.Random) -> Callable[[int], str]:
    """Write ``rows`` alpaca rows of generated words; return the generator of ``n`` words."""
    words = "the of and a to in is you that it he was for on are as with his they at be this have from".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    with (folder / "alpaca.jsonl").open("w") as out:
        for _ in range(rows):
            out.write(json.dumps({"instruction": text(12), "input": text(rng.randint(0, 8)), "output": text(40)})
                      + "\n")
    return text


def generate(folder: Path, alpaca: int, sharegpt: int) -> Path:
    """Deterministic alpaca and multi-turn sharegpt files plus their v1 YAML."""
    rng = random.Random(0)
    text = _alpaca_rows(folder, alpaca, rng)
    with (folder / "sharegpt.jsonl").open("w") as out:
        for _ in range(sharegpt):
            turns = []
            for _ in range(rng.randint(1, 6)):
                turns += [{"from": "human", "value": text(10)}, {"from": "gpt", "value": text(30)}]
            out.write(json.dumps({"conversations": turns}) + "\n")
    return write_config(folder)


def generate_tool_calls(folder: Path, alpaca: int, sharegpt: int) -> Path:
    """Multi-turn-heavy data shaped like glaive's function-calling sets: ``sharegpt`` conversations
    of 2-7 exchanges, 40% of them a ``function_call`` (a tenth of those invalid JSON, which the
    build drops) and its ``observation`` before the answer; half the rows carry ``tools``, drawn
    from three times as many tool sets as there are such rows, so about 85% of them are distinct
    (LLaMA-Factory's glaive demo: 162 distinct in 191); plus ``alpaca`` single-turn rows."""
    rng = random.Random(0)
    text = _alpaca_rows(folder, alpaca, rng)

    def tool_set() -> list[dict[str, Any]]:
        return [{"name": f"tool_{rng.randrange(1000)}", "description": text(8), "parameters": {
            "type": "object", "properties": {text(1): {"type": "string", "description": text(5)}
                                             for _ in range(rng.randint(1, 3))}, "required": []}}
                for _ in range(rng.randint(1, 3))]

    tool_sets = [json.dumps(tool_set()) for _ in range(max(1, 3 * sharegpt // 2))]
    with (folder / "sharegpt.jsonl").open("w") as out:
        for _ in range(sharegpt):
            turns = []
            for _ in range(rng.randint(2, 7)):
                turns.append({"from": "human", "value": text(10)})
                if rng.random() < 0.4:
                    call = json.dumps({"name": f"tool_{rng.randrange(1000)}", "arguments": {text(1): text(3)}})
                    turns.append({"from": "function_call", "value": call if rng.random() >= 0.1 else call[:-1]})
                    turns.append({"from": "observation", "value": json.dumps({"result": text(12)})})
                turns.append({"from": "gpt", "value": text(30)})
            row: dict[str, Any] = {"conversations": turns}
            if rng.random() < 0.5:
                row["tools"] = rng.choice(tool_sets)
            out.write(json.dumps(row) + "\n")
    return write_config(folder)


def one_pass(engine: Any, indices: list, batch: int) -> float:
    """Samples per second fetching ``indices`` one by one (batch 1) or in lists of ``batch``."""
    started = time.perf_counter()
    if batch == 1:
        for i in indices:
            engine[i]
    else:
        for k in range(0, len(indices), batch):
            engine[indices[k : k + batch]]
    return len(indices) / (time.perf_counter() - started)


#: ``--rounds``: how many times every best-of or median-of figure is taken (1: a smoke run); the
#: sections in other scripts read it from the environment, through :func:`repeats`.
ROUNDS_VARIABLE = "DATAIDX_BENCH_ROUNDS"


def repeats(default: int) -> int:
    """How many times to take a figure whose best (or median) is printed: ``default``, or ``--rounds``."""
    return int(os.environ.get(ROUNDS_VARIABLE) or default)


def rates(engines: list[tuple[Any, list]], batch: int, rounds: int = 3) -> list[float]:
    """The best of ``rounds`` passes per engine, the engines taking turns within each round, so
    a busy moment of a shared machine does not fall on one engine only."""
    best = [0.0] * len(engines)
    for _ in range(repeats(rounds)):
        for number, (engine, indices) in enumerate(engines):
            best[number] = max(best[number], one_pass(engine, indices, batch))
    return best


def private_dirty_mib(pid: int) -> float:
    """Private dirty memory of a process: its heap plus pages copied on write since the fork."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no Private_Dirty in smaps_rollup")


def loader_run(engine: Any, count: int, workers: int = 2, collate: Any = list) -> tuple[float, float]:
    """Samples/s through DataLoader(``workers`` workers, batch 32, random order) and the largest
    growth of a worker's private memory between its first batches and the end of the pass (MiB;
    0.0 without workers)."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    sampler = RandomSampler(engine, num_samples=min(count, len(engine)), generator=torch.Generator().manual_seed(0))
    loader = DataLoader(engine, batch_size=32, sampler=sampler, num_workers=workers, collate_fn=collate,
                        persistent_workers=workers > 0)
    iterator = iter(loader)
    started = time.perf_counter()
    batches = 0
    baseline: dict[int, float] = {}
    settled = min(20, len(loader) // 2)  # the 20th batch, or halfway through a short pass
    for number, _ in enumerate(iterator):
        batches += 1
        if number == settled and workers:
            baseline = {w.pid: private_dirty_mib(w.pid) for w in iterator._workers}
    seconds = time.perf_counter() - started
    growth = max((private_dirty_mib(pid) - before for pid, before in baseline.items()), default=0.0)
    if workers:
        iterator._shutdown_workers()
    fetched = min(count, len(engine))
    return fetched / seconds, growth


class PrefetchedDataset:
    """Serves samples fetched in advance, so a DataLoader over it measures only its own costs:
    workers pickling batches, the main process unpickling them. No engine can beat it."""

    def __init__(self, samples: list[Any], length: int) -> None:
        self.samples, self.length = samples, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        return self.samples[index % len(self.samples)]


def print_table(header: tuple[str, ...], lines: list[tuple[str, ...]], left: tuple[int, ...] = (0,)) -> None:
    """Columns padded to their widest cell: text columns (``left``) flush left, figures right."""
    widths = [max(len(r[i]) for r in lines + [header]) for i in range(len(header))]
    for line in [header] + lines:
        print("  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip())

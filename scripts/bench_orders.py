"""Training orders (issue 28) at 20M positions, beside torch's DistributedSampler, in one run.

One store of scripts/bench.py's data (alpaca rows and multi-turn sharegpt conversations), whose
mixture repeats every entry until it holds about 20M positions. Then, for 8 ranks and a global
batch of 1,024:

- resume: from nothing to rank 3's first batch after a state at position 12,345,678 (a new
  ``OrderSampler``, ``load_state_dict``, the first batch), against ``DistributedSampler``, which
  draws the epoch's whole permutation and must skip the batches already read;
- ``dataidx steps``: the entries (dataset, row, cut) of one global step, from opening the store,
  in the process and as the command.

    python scripts/bench.py --orders-only                       # ~20M positions
    python scripts/bench.py --orders-only --orders-positions 2000000
"""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import generate

GLOBAL_BATCH, WORLD, RANK = 1024, 8, 3
RESUME_AT = 12_345_678


def median_ms(run: Any, times: int) -> float:
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return 1000 * statistics.median(seconds)


def orders_table(work: Path, positions: int) -> tuple[int, list[tuple[str, ...]]]:
    """Lines ``(figure, dataidx, DistributedSampler, ratio, target, verdict)`` and the positions."""
    from torch.utils.data import DistributedSampler

    from dataidx import DataEngine, OrderSampler
    from dataidx.index import build
    from dataidx.read import StoreReader, TrainingOrder, step_items

    folder = work / "orders"
    folder.mkdir()
    alpaca = max(100, min(100_000, positions // 200))  # the entries repeated ~200 times at 20M
    config = generate(folder, alpaca, alpaca // 4)
    store = folder / "orders.db"
    build(config, store)
    with DataEngine(store) as engine:
        weight = max(1, round(positions / len(engine)))
    text = config.read_text()
    (folder / "repeated.yaml").write_text(text.replace("source: local", f"source: local\n  weight: {weight}"))
    from dataidx.index import add_mixture

    add_mixture(store, folder / "repeated.yaml", "repeated", seed=0)
    engine = DataEngine(store, "repeated")
    total = len(engine)
    at = min(RESUME_AT, total - GLOBAL_BATCH)
    state = {"dataidx_order": 1, "epoch": 0, "position": at - at % GLOBAL_BATCH, "seed": 0, "length": total,
             "tail": "trim", "reads": engine.state_dict()["reads"]}

    def resume_ours() -> None:
        sampler = OrderSampler(engine, global_batch_size=GLOBAL_BATCH, rank=RANK, world_size=WORLD, seed=0)
        sampler.load_state_dict(state)
        next(iter(sampler))

    def resume_torch() -> None:
        sampler = DistributedSampler(engine, num_replicas=WORLD, rank=RANK, seed=0)
        sampler.set_epoch(0)
        share = GLOBAL_BATCH // WORLD
        done = state["position"] // GLOBAL_BATCH
        batches = itertools.islice(iter(sampler), done * share, (done + 1) * share)
        list(batches)

    ours, theirs = median_ms(resume_ours, 20), median_ms(resume_torch, 3)
    lines = [(f"resume at sample {state['position']:,} of {total:,}: new sampler, load, first batch (ms)",
              f"{ours:.2f}", f"{theirs:,.0f}", f"{theirs / ours:,.0f}x", "<= 5 ms", "met" if ours <= 5 else "MISSED")]

    step = state["position"] // GLOBAL_BATCH

    def steps_in_process() -> None:
        with StoreReader(store, "repeated") as reader:
            found = step_items(TrainingOrder(len(reader), seed=0), GLOBAL_BATCH, step, step)
            reader.triples([item for _, _, item in found])

    in_process = median_ms(steps_in_process, 20)
    lines.append((f"steps: the {GLOBAL_BATCH:,} entries of global step {step:,}, from opening the store (ms)",
                  f"{in_process:.2f}", "", "", "<= 10 ms", "met" if in_process <= 10 else "MISSED"))
    command = [sys.executable, "-m", "dataidx", "steps", str(store), "--mixture", "repeated",  # the sampler's step
               "--global-batch-size", str(GLOBAL_BATCH), "--epoch", "0", str(step), "--json"]
    started = time.perf_counter()
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    assert printed.count("\n") == GLOBAL_BATCH
    lines.append(("  `dataidx steps` as a command, Python's start and imports included (s)", f"{wall:.2f}", "", "",
                  "", ""))
    engine.close()
    return total, lines

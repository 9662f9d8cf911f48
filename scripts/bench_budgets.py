"""Token budgets and epochs at the bench size: `dataidx mix --epochs 3` by entries and by tokens.

Builds about 1.9M entries of generated data (scripts/scale_data.py), writes a render spec of
lognormal lengths over every entry by SQL (as scripts/bench_scale.py does; rendering 1.9M entries
takes minutes and is measured there), marks one entry in twenty as not training, then times each
command in a fresh process with its peak RSS, side by side with the entry-count mixture it
replaces (LLaMA-Factory v1 has neither budgets nor stored epochs: it redraws, unseeded, per run).

    python scripts/bench_budgets.py                   # ~1.9M entries
    python scripts/bench_budgets.py --entries 500000
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import print_table
from scale_common import measured, snippet, synthetic_spec
from scale_data import generate
from scratch import scratch_folder

SET_EPOCH = """
import json, sys, time
from dataidx import DataEngine
t = time.perf_counter()
engine = DataEngine(sys.argv[1], "tokens")
opened = time.perf_counter() - t
t = time.perf_counter()
engine.set_epoch(2); engine[0]
print(json.dumps([opened, time.perf_counter() - t, len(engine)]))
"""


def budget_configs(folder: Path, store: Path) -> tuple[Path, Path, dict[str, tuple[str, int]]]:
    """An entry-count config and a token-budget config asking for about the same share."""
    base = yaml.safe_load((folder / "bench.yaml").read_text())
    with sqlite3.connect(store) as connection:
        totals = {dataset: (tokens, supervised) for dataset, tokens, supervised in connection.execute(
            "SELECT dataset, sum(tokens), sum(supervised_tokens) FROM entry_lengths "
            "WHERE spec = 'bench' AND status IN ('ok', 'truncated') GROUP BY dataset")}
    budgets = {"alpaca": ("tokens", totals["alpaca"][0] // 2), "sharegpt": ("supervised_tokens",
                                                                           totals["sharegpt"][1] * 3 // 2)}
    by_entries = {"alpaca": {**base["alpaca"], "weight": 0.5}, "sharegpt": {**base["sharegpt"], "weight": 1.5}}
    by_tokens = {name: {**base[name], key: value} for name, (key, value) in budgets.items()}
    entries_config, tokens_config = folder / "by_entries.yaml", folder / "by_tokens.yaml"
    entries_config.write_text(yaml.safe_dump(by_entries, sort_keys=False))
    tokens_config.write_text(yaml.safe_dump(by_tokens, sort_keys=False))
    return entries_config, tokens_config, budgets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_900_000)
    args = parser.parse_args()
    env = {**os.environ, "HF_DATASETS_CACHE": str(scratch_folder("dataidx-hf-"))}
    dataidx = str(Path(sys.executable).with_name("dataidx"))
    work = scratch_folder("dataidx-budgets-")
    config = generate(work, args.entries)
    store = work / "bench.db"
    build_s, build_mib = measured(dataidx, "build", str(config), "-o", str(store), "-q", env=env)
    synthetic_spec(store)
    with sqlite3.connect(store) as connection:  # one entry in twenty does not train
        connection.execute("UPDATE entry_renders SET status = 'too_long' WHERE entry_id % 20 = 0")
        entries = connection.execute("SELECT count(*) FROM base_entries").fetchone()[0]
    by_entries, by_tokens, budgets = budget_configs(work, store)
    rows = [("entries in the store", f"{entries:,}", ""), ("dataidx build", f"{build_s:.1f}", f"{build_mib:.0f}")]
    for label, mix_config, name, extra in (
        ("by entries (weights 0.5 and 1.5), --epochs 3", by_entries, "entries3", ["--epochs", "3"]),
        ("by entries, --epochs 3 --spec (tokens recorded)", by_entries, "entries3spec",
         ["--epochs", "3", "--spec", "bench"]),
        ("token budgets, --epochs 1", by_tokens, "tokens1", ["--spec", "bench"]),
        ("token budgets, --epochs 3", by_tokens, "tokens", ["--spec", "bench", "--epochs", "3"]),
    ):
        seconds, mib = measured(dataidx, "mix", str(store), str(mix_config), "--name", name, *extra, env=env)
        rows.append((f"dataidx mix {label}", f"{seconds:.1f}", f"{mib:.0f}"))
    for label, mixture in (("stored by the draw", "tokens"), ("counted from runs and positions", "entries3")):
        seconds, mib = measured(dataidx, "compose", str(store), "--mixture", mixture, "--spec", "bench", env=env)
        rows.append((f"dataidx compose --spec, {label}", f"{seconds:.2f}", f"{mib:.0f}"))
    opened, switched, length = snippet(SET_EPOCH, str(store), env=env)
    rows.append(("DataEngine(store, 'tokens') open / set_epoch(2) + first fetch", f"{opened:.2f} / {switched:.3f}",
                 ""))
    print_table(("figure", "seconds", "peak MiB"), rows)
    spent = json.loads(subprocess.run([dataidx, "query", str(store), "--json", "SELECT * FROM token_composition "
                                       "WHERE mixture = 'tokens' ORDER BY epoch, dataset"],
                                      check=True, capture_output=True, text=True, env=env).stdout)
    print("\nbudgets against what each epoch drew (epoch 2 serves", f"{length:,} entries):")
    print_table(("epoch", "dataset", "budget", "drawn", "off by", "entries"), [
        (str(row["epoch"]), row["dataset"], f"{budgets[row['dataset']][0]} {budgets[row['dataset']][1]:,}",
         f"{row[budgets[row['dataset']][0]]:,}", f"{row[budgets[row['dataset']][0]] - budgets[row['dataset']][1]:+,}",
         f"{row['entries']:,}") for row in spent])


if __name__ == "__main__":
    main()

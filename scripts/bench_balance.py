"""Compute-balanced pack orders (issue 56) side by side with today's plan, on the same packs:
a long-tailed length mix (lognormal, at the cutoff where it passes it), best-fit packs of the
cutoff, and what each global step costs each rank under a model's cost per sequence
``a*L + b*L^2`` (dataidx.pack.balance):

    python scripts/bench_balance.py                        # 1M entries, cutoff 32k, 8 ranks
    python scripts/bench_balance.py --entries 20000 --world-size 4

Today's plan is best-fit packs in a seeded shuffled order: every rank's tokens are equal, its
compute is not. The balanced order keeps the packs and their fill. "Step time" sums, over the
steps, the costliest rank's cost: what a synchronous step waits for.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts")]

from bench_common import print_table  # noqa: E402

from dataidx.pack.balance import CostModel, balanced_order, imbalance, pack_costs, rank_costs  # noqa: E402
from dataidx.pack.planner import plan_packs  # noqa: E402

#: Llama-2-7B's sizes (its config.json): the cost model's coefficients.
LLAMA_7B = {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008, "num_attention_heads": 32,
            "vocab_size": 32000}


def balance_table(entries: int, cutoff: int, world_size: int,
                  micro_batches: list[int]) -> tuple[str, list[tuple[str, ...]]]:
    """The data's description and, per packs a rank takes a step, today's plan and the balanced
    order side by side: max/mean cost per step (mean, p99, worst), fill, step time, planning."""
    rng = np.random.default_rng(0)
    lengths = np.minimum(np.maximum(rng.lognormal(np.log(1500), 1.2, entries).astype(np.int64), 1), cutoff)
    started = time.perf_counter()
    plan = plan_packs(lengths, cutoff, seed=0)
    planned = time.perf_counter() - started
    model = CostModel.of_config(LLAMA_7B)
    costs = pack_costs(model, lengths[plan.members], plan.sizes)
    said = (f"{entries:,} entries, lognormal lengths (median 1,500, {np.mean(lengths == cutoff):.2%} at the cutoff "
            f"{cutoff:,}); {len(costs):,} packs, fill {plan.fill:.4f}; Llama-2-7B's cost model (a {model.a:.3g}, "
            f"b {model.b:.3g}); {world_size} ranks")
    rows = []
    for micro in micro_batches:
        started = time.perf_counter()
        order = balanced_order(costs, world_size=world_size, micro_batches=micro, seed=0)
        ordered = time.perf_counter() - started
        balanced = rank_costs(costs, order, world_size=world_size, micro_batches=micro).max(axis=1).sum()
        for name, found, seconds in (("today: best fit, shuffled", np.arange(len(costs)), planned),
                                     ("balanced by compute", order, planned + ordered)):
            per_rank = rank_costs(costs, found, world_size=world_size, micro_batches=micro)
            ratio = imbalance(per_rank)
            rows.append((f"{micro} a rank a step", name, f"{ratio.mean():.4f}", f"{np.quantile(ratio, 0.99):.4f}",
                         f"{ratio.max():.4f}", f"{plan.fill:.4f}", f"{per_rank.max(axis=1).sum() / balanced:.3f}",
                         f"{seconds:.2f}"))
    return said, rows


HEADER = ("packs", "plan", "max/mean mean", "p99", "worst step", "fill", "step time", "planning (s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--cutoff", type=int, default=32_768, help="tokens a pack holds, and the longest sequence")
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--micro-batches", type=int, nargs="+", default=[1, 4], help="packs a rank takes a step")
    args = parser.parse_args()
    said, rows = balance_table(args.entries, args.cutoff, args.world_size, args.micro_batches)
    print(said)
    print_table(HEADER, rows, left=(0, 1))


if __name__ == "__main__":
    main()

"""Duplicates and benchmark leaks (issue 55) on a planted corpus (scripts/planted_corpus.py):
recall and precision against what was planted, and time, side by side for near dedup and
decontamination:

    python scripts/bench_dedup.py                    # 200k originals (+ 23% copies), a 5,000-item eval set
    python scripts/bench_dedup.py --rows 2000 --items 200   # a smoke run
    python scripts/bench_dedup.py --datatrove ~/dt/bin/python  # and datatrove's MinHash beside it

Recall and precision are by row: a copy row flagged (exact or near copies: the duplicates; its
representative must be its original), a hard negative or a same-prompt row flagged (a false
duplicate); an original holding an item whole flagged with that item (a leak), a row flagged
otherwise (a false leak).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts")]

from bench_common import print_table  # noqa: E402
from planted_corpus import generate  # noqa: E402
from scratch import scratch_folder  # noqa: E402

from dataidx.dedup import find_duplicates, find_leaks, parse_eval, read_eval  # noqa: E402
from dataidx.index import build  # noqa: E402


def hashed_in_python(config: Path) -> float:
    """The alternative to fingerprints: every row converted and its entries' messages hashed in
    Python (128-bit xxh3 of the same serialization), as a loader that hashes on each start does."""
    from dataidx.config import load_config
    from dataidx.convert import SampleDigests, converters, cuts

    started = time.perf_counter()
    for dataset in load_config(config).datasets:
        converter, digests = converters.get(dataset.converter or "none"), SampleDigests()
        with open(dataset.path) as lines:
            for line in lines:
                sample = converter.func(json.loads(line))
                digests.add(sample, cuts(sample))
        digests.result()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="original rows (copies are added to them)")
    parser.add_argument("--items", type=int, default=5_000, help="items of the eval set")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    parser.add_argument("--work", type=Path, help="a folder to keep the corpus in (made again each run)")
    parser.add_argument("--datatrove", metavar="PYTHON", help="an interpreter with datatrove: its MinHash dedup on "
                        "the same corpus, side by side (scripts/datatrove_dedup.py)")
    args = parser.parse_args()
    work = args.work or scratch_folder("dataidx-dedup-")
    started = time.perf_counter()
    config, eval_file, planted = generate(work, args.rows, args.items)
    made = time.perf_counter() - started
    store = work / "planted.db"
    store.unlink(missing_ok=True)
    started = time.perf_counter()
    exact = build(config, store).exact
    built = time.perf_counter() - started
    with closing(sqlite3.connect(store)) as connection:
        entries = connection.execute("SELECT count(*) FROM base_entries").fetchone()[0]
        first_copy = connection.execute("SELECT first_entry FROM datasets WHERE name = 'copies'").fetchone()[0]

    with closing(sqlite3.connect(store)) as connection:
        grouped = {(dataset, row): (rep_dataset, rep_row) for dataset, row, rep_dataset, rep_row in connection.execute(
            "SELECT dataset, row, representative_dataset, representative_row FROM exact_duplicates WHERE entry_id <> "
            "representative_entry")}
        prompts = {row for row, in connection.execute("SELECT row FROM same_prompts WHERE dataset = 'copies'")}
    exact_copies = {("copies", copy): ("originals", source) for copy, source in planted.copies["exact"]}
    exact_right = sum(1 for row, rep in grouped.items() if exact_copies.get(row) == rep)
    prompt_only = sum(1 for copy, _ in planted.copies["prompt_only"] if copy in prompts and ("copies", copy) not in
                      grouped) / max(1, len(planted.copies["prompt_only"]))
    in_python = hashed_in_python(config)

    started = time.perf_counter()
    find_duplicates(store, "dups", jobs=args.jobs)
    near_s = time.perf_counter() - started
    with closing(sqlite3.connect(store)) as connection:
        flagged = {(dataset, row): (rep_dataset, rep_row) for dataset, row, rep_dataset, rep_row in connection.execute(
            "SELECT dataset, row, representative_dataset, representative_row FROM duplicates WHERE run = 'dups'")}
    duplicates = {("copies", copy): ("originals", source) for kind in ("exact", "near")
                  for copy, source in planted.copies[kind]}
    right = sum(1 for row, rep in flagged.items() if duplicates.get(row) == rep)
    by_kind = {kind: sum(1 for copy, _ in planted.copies[kind] if ("copies", copy) in flagged) / max(1, len(
        planted.copies[kind])) for kind in planted.copies}

    started = time.perf_counter()
    find_leaks(store, "leaks", [read_eval(*parse_eval(f"bench={eval_file}"))], jobs=args.jobs)
    leaks_s = time.perf_counter() - started
    with closing(sqlite3.connect(store)) as connection:
        leaked = {row: item for dataset, row, item in connection.execute(
            "SELECT dataset, row, item FROM contamination WHERE run = 'leaks'") if dataset == "originals"}
        leaked_copies = connection.execute("SELECT count(*) FROM contamination WHERE run = 'leaks' AND dataset = "
                                           "'copies'").fetchone()[0]
    # A copy of a leaking original leaks too: counted right when its original was planted a leak.
    copy_sources = {copy: source for kind in planted.copies for copy, source in planted.copies[kind]}
    with closing(sqlite3.connect(store)) as connection:
        copies_leaking = [row for row, in connection.execute(
            "SELECT row FROM contamination WHERE run = 'leaks' AND dataset = 'copies'")]
    right_copies = sum(1 for row in copies_leaking if copy_sources.get(row) in planted.leaks)
    leaks_right = sum(1 for row, item in leaked.items() if planted.leaks.get(row) == item)

    side: list[tuple[str, ...]] = [("dataidx dedup (rensa, 16x7, verified)", f"{near_s:.1f}", f"{by_kind['exact']:.4f}",
             f"{by_kind['near']:.4f}", f"{right / max(1, len(flagged)):.4f}", f"{by_kind['hard_negative']:.4f}",
             f"{by_kind['prompt_only']:.4f}")]
    if args.datatrove:
        done = subprocess.run([args.datatrove, str(REPO / "scripts" / "datatrove_dedup.py"), str(work)],
                              capture_output=True, text=True, check=True)
        other = json.loads(done.stdout.strip().splitlines()[-1])
        side.append((other["tool"], f"{other['seconds']:.1f}", *(f"{other['recall'][kind]:.4f}" for kind in (
            "exact", "near")), f"{other['precision']:.4f}", *(f"{other['recall'][kind]:.4f}" for kind in (
                "hard_negative", "prompt_only"))))
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.rows:,} originals + "
          f"{entries - first_copy + 1:,} copies = {entries:,} entries; eval set of {args.items:,} items; corpus made "
          f"in {made:.0f} s, built in {built:.1f} s")
    print_table(("figure", "value"), [
        ("exact, at build: seconds (fingerprints, candidates hashed)", f"{exact.seconds:.2f} of the build's "
         f"{built:.1f} ({exact.seconds / built:.1%}); {exact.candidates:,} candidates"),
        ("exact, the alternative: every entry hashed in Python", f"{in_python:.1f} s ({in_python / built:.0%} of the "
                                                                  "build)"),
        ("exact: recall, exact copies (grouped with their original)",
         f"{exact_right / max(1, len(exact_copies)):.4f}"),
        ("exact: precision (entries grouped that are planted copies)", f"{exact_right / max(1, len(grouped)):.4f}"),
        ("exact: same prompt, other answer, in same_prompts (not grouped)", f"{prompt_only:.4f}"),
        ("near dedup: seconds (all cores)", f"{near_s:.1f} ({entries / near_s:,.0f} entries/s)"),
        ("near dedup: recall, exact copies", f"{by_kind['exact']:.4f}"),
        ("near dedup: recall, near copies (J 0.80-0.95)", f"{by_kind['near']:.4f}"),
        ("near dedup: precision (rows flagged with their original)", f"{right / max(1, len(flagged)):.4f}"),
        ("near dedup: hard negatives (J 0.55-0.78) flagged", f"{by_kind['hard_negative']:.4f}"),
        ("near dedup: same prompt, other answer, flagged", f"{by_kind['prompt_only']:.4f}"),
        ("decontamination: seconds (all cores)", f"{leaks_s:.1f} ({leaks_s / entries * 1e6 * (os.cpu_count() or 1):.1f}"
                                                 " us an entry on one core)"),
        ("decontamination: recall (originals holding an item)", f"{leaks_right / max(1, len(planted.leaks)):.4f}"),
        ("decontamination: precision (originals and their copies)",
         f"{(leaks_right + right_copies) / max(1, len(leaked) + leaked_copies):.4f}"),
        ("decontamination: fragments (10-30% of an item) flagged",
         f"{sum(1 for row in planted.fragments if row in leaked) / max(1, len(planted.fragments)):.4f}"),
    ])
    print()
    print_table(("near duplicates, side by side", "seconds", "recall exact", "recall near", "precision",
                 "hard negatives flagged", "same prompt flagged"), side)


if __name__ == "__main__":
    main()

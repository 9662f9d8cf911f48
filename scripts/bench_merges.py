"""Cut merges (issue 29): tokens forwarded per epoch with and without ``dataidx pack --merge-cuts``.

The data is scripts/bench.py's multi-turn sharegpt conversations (1 to 6 exchanges each), built,
rendered with stored tokens under two real families' templates with tokenizers built like theirs
(tests/conformance): Qwen2.5 (every cut a prefix of the next) and Qwen3 (it rewrites past
assistant turns, so cuts branch). Each is packed plain, with ``--merge-cuts`` and with
``--merge-cuts --trees``; the table says per template the conversations merged, those kept as
cuts and why, tokens forwarded before and after, and steps per epoch at a global batch of 64 packs.

Then the cost of planning: ``dataidx pack`` and ``dataidx pack --merge-cuts --trees`` on one
store in fresh processes, best of 2 (``--merges-scale STORE``: a store with stored tokens, such
as scripts/bench_tokens_scale.py's ~2M-entry one, under its spec ``--merges-spec``).

    python scripts/bench.py --merges-only
    python scripts/bench.py --merges-only --merges-scale /tmp/tok2m/2000000/bench.db --merges-spec chatml
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench_common import generate, repeats

REPO = Path(__file__).resolve().parents[1]
DATAIDX = [sys.executable, "-m", "dataidx"]
CAPACITY, GLOBAL_BATCH = 8192, 64
#: Merged conversations' outcomes, then why the others stayed cuts.
MERGED = ("merged", "tree")


def _dataidx(*args: object) -> str:
    """A command in a fresh process (what :func:`planning_table` times): its stderr and stdout."""
    done = subprocess.run([*DATAIDX, *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"dataidx {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done.stderr + done.stdout


def _in_process(*args: object) -> str:
    """A command run in this process, as a user types it (not timed: no interpreter start per command)."""
    from click.testing import CliRunner

    from dataidx.cli import cli

    done = CliRunner().invoke(cli, list(map(str, args)), prog_name="dataidx")
    if done.exit_code:
        raise SystemExit(f"dataidx {' '.join(map(str, args))} failed:\n{done.output}") from done.exception
    return done.output


def _plan(store: Path, name: str) -> dict:
    info = json.loads(_in_process("info", store, "--json"))
    return next(plan for plan in info["pack_plans"] if plan["plan"] == name)


def merges_table(work: Path, conversations: int) -> tuple[int, list[tuple[str, ...]]]:
    """One line per template and merge mode: what merged, what did not and why, tokens and steps."""
    sys.path.insert(0, str(REPO))
    from tests.conformance import build_tokenizer

    folder = work / "merges"
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "merges.db"
    generate(folder, 0, conversations)
    config = folder / "sharegpt.yaml"  # the conversations alone: a multi-turn mixture
    config.write_text(f"sharegpt:\n  path: {folder / 'sharegpt.jsonl'}\n  source: local\n  converter: sharegpt\n")
    _in_process("build", config, "-o", store, "-q")
    lines = []
    for slug in ("qwen2_5", "qwen3"):
        _in_process("render", store, "--tokenizer", build_tokenizer(slug, folder / slug), "--cutoff", 4096,
                    "--name", slug, "--store-tokens")
        plain = f"{slug}_plain"
        _in_process("pack", store, "--spec", slug, "--capacity", CAPACITY, "--name", plain)
        before = _plan(store, plain)
        for mode, flags in (("chains", ["--merge-cuts"]), ("trees", ["--merge-cuts", "--trees"])):
            name = f"{slug}_{mode}"
            _in_process("pack", store, "--spec", slug, "--capacity", CAPACITY, "--name", name, *flags)
            plan = _plan(store, name)
            merges = {merge["outcome"]: merge for merge in plan["merges"]}
            merged = " + ".join(f"{merges[o]['rows']:,} {o}" for o in MERGED if o in merges) or "0"
            kept = ", ".join(f"{m['rows']:,} {o}" for o, m in merges.items() if o not in MERGED) or "none"
            lines.append((slug, mode, merged, kept, f"{before['tokens']:,}", f"{plan['tokens']:,}",
                          f"{before['tokens'] / plan['tokens']:.2f}x", f"{before['packs'] // GLOBAL_BATCH:,}",
                          f"{plan['packs'] // GLOBAL_BATCH:,}"))
    entries = json.loads(_in_process("info", store, "--json"))["mixtures"][0]["entries"]
    return entries, lines


def planning_table(store: Path, spec: str) -> list[tuple[str, ...]]:
    """``dataidx pack`` against ``--merge-cuts --trees`` on ``store``, fresh processes, best of 2."""
    lines = []
    seconds: dict[str, float] = {}
    for label, flags in (("dataidx pack", []), ("dataidx pack --merge-cuts", ["--merge-cuts"]),
                         ("dataidx pack --merge-cuts --trees", ["--merge-cuts", "--trees"])):
        best = float("inf")
        for _ in range(repeats(2)):
            started = time.perf_counter()
            said = _dataidx("pack", store, "--spec", spec, "--capacity", CAPACITY, "--name", "bench_merges", *flags)
            best = min(best, time.perf_counter() - started)
        seconds[label] = best
        lines.append((label, f"{best:.2f}", f"{best / seconds['dataidx pack']:.2f}x", said.splitlines()[-1][:90]))
    _dataidx("remove-plan", store, "bench_merges")
    return lines

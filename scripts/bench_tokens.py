"""Stored tokens (issue 27) beside rendering on every fetch, side by side in one run.

One store of scripts/bench.py's data (alpaca rows and multi-turn sharegpt conversations), a
byte-level BPE of 8k trained on it, ChatML at cutoff 4096, and specs of the same rendering:

- ``rerender``: ``dataidx render`` alone; ``DataEngine(store, render="rerender")`` renders each
  fetch (template and tokenizer, the whole entry and its prompt under v1's labels);
- ``tokens``: the same rendering with ``--store-tokens`` (16-bit words); the engine serves it
  from the mapped token file, with no tokenizer loaded;
- ``tokens32``: the same with the BPE grown past 2^15 ids by added tokens (32-bit words), for
  the size on disk only;
- ``rerender-qwen`` and ``tokens-qwen``: the same tokenizer under a model's own Jinja template
  (Qwen2.5's, tests/conformance/families), the path a user's real template takes: ChatML above
  has a plain-Python fast path no model's own template gets, so its re-render is the cheapest
  there is. The fetch rows are measured against both.

    python scripts/bench.py --tokens-only                  # 56k alpaca + 14k sharegpt rows: ~105k entries
    python scripts/bench.py --tokens-only --tokens-rows 20000 --tokens-fetches 2000

Rates are the best of three passes, the two engines taking turns; render times are pairs in
turns. The last lines check that every served dict from tokens equals the re-rendered one, over
every training entry of the store (the issue asks for it on a store of 100k entries at least).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import PrefetchedDataset, generate, loader_run, rates, repeats

#: Spec names of the table (one store holds all three).
RERENDER, TOKENS, TOKENS32 = "rerender", "tokens", "tokens32"
RERENDER_QWEN, TOKENS_QWEN = "rerender-qwen", "tokens-qwen"
QWEN_TEMPLATE = Path(__file__).resolve().parents[1] / "tests" / "conformance" / "families" / "qwen2_5.jinja"
#: Modules serving from tokens must not import.
RENDERING_MODULES = ("transformers", "tokenizers", "jinja2")
CUTOFF = 4096

FIRST_SAMPLE = """
import json, sys, time
from dataidx import DataEngine
started = time.perf_counter()
engine = DataEngine(sys.argv[1], render=sys.argv[2])
engine[0]
seconds = time.perf_counter() - started
print(json.dumps([seconds, [m for m in sys.argv[3:] if m in sys.modules]]))
"""


def wide_tokenizer(source: Path, target: Path, vocabulary: int = 40_000) -> int:
    """``source``'s tokenizer widened to ``vocabulary`` ids (so its words are 32-bit), saved in
    ``target``; its size. No text produces the new ids (tests.helpers.widen_vocabulary): ids do not change."""
    from tests.helpers import widen_vocabulary

    shutil.copytree(source, target)
    return widen_vocabulary(target, vocabulary)


def store_bytes(store: Path) -> int:
    """Bytes of the store's pages in use: its file size less its free pages. A write rewrites a copy of
    the store, whose free pages absorb some growth; counting them would hide the growth."""
    import sqlite3

    with sqlite3.connect(store) as connection:
        pages, free, size = (connection.execute(f"PRAGMA {name}").fetchone()[0]
                             for name in ("page_count", "freelist_count", "page_size"))
    connection.close()
    return (pages - free) * size


def render_seconds(store: Path, tokenizer: Path, name: str, store_tokens: bool, template: str | None = None) -> float:
    """Wall seconds of ``render_store`` at default jobs (tokenizer load included: both pay it)."""
    from dataidx.render import RenderRequest, render_store

    started = time.perf_counter()
    render_store(RenderRequest(store, tokenizer, cutoff=CUTOFF, name=name, store_tokens=store_tokens,
                               template=template))
    return time.perf_counter() - started


def token_file(store: Path, spec: str) -> tuple[int, int, int]:
    """``(bytes, tokens, word bytes)`` of a spec's token file, from the store's ``token_files`` view."""
    import sqlite3

    with sqlite3.connect(store) as connection:
        found = connection.execute("SELECT bytes, tokens, word_bytes FROM token_files WHERE spec = ?", (spec,))
        file_bytes, tokens, word_bytes = found.fetchone()
    connection.close()
    return file_bytes, tokens, word_bytes


def added_tokens_size(store: Path, tokenizer: Path, spec: str) -> dict[str, float]:
    """Render ``spec`` alone, then add its tokens (``--store-tokens`` on the spec rendered the same
    way): the store's growth from each step, and the token file's bytes, tokens and word size."""
    before = store_bytes(store)
    render_seconds(store, tokenizer, spec, store_tokens=False)
    rendered = store_bytes(store)
    render_seconds(store, tokenizer, spec, store_tokens=True)
    file_bytes, tokens, word_bytes = token_file(store, spec)
    growth = store_bytes(store) - rendered
    return {"lengths": rendered - before, "growth": growth, "file": file_bytes, "tokens": tokens,
            "word_bytes": word_bytes, "per_token": (file_bytes + growth) / tokens}


def render_turns(store: Path, tokenizer: Path, rounds: int = 3) -> list[tuple[float, float]]:
    """``(render --store-tokens, render)`` seconds, pair by pair, each a new spec on a copy of the
    store; the two take turns, so a busy minute of a shared machine falls on both."""
    copy = store.with_name("turns.db")
    shutil.copyfile(store, copy)
    pairs = []
    for attempt in range(repeats(rounds)):
        with_tokens = render_seconds(copy, tokenizer, f"tokens-{attempt}", store_tokens=True)
        alone = render_seconds(copy, tokenizer, f"alone-{attempt}", store_tokens=False)
        pairs.append((with_tokens, alone))
    copy.unlink()
    shutil.rmtree(copy.with_name(copy.name + ".tokens"), ignore_errors=True)
    return pairs


def first_sample(store: Path, spec: str, runs: int) -> tuple[float, list[str]]:
    """Seconds from ``DataEngine(store, render=spec)`` to its first sample in a fresh process
    (imports of dataidx excluded; the median of ``runs``), and which rendering modules it loaded."""
    found = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", FIRST_SAMPLE, str(store), spec, *RENDERING_MODULES],
                             capture_output=True, text=True, check=True).stdout
        found.append(json.loads(out.strip().splitlines()[-1]))
    found.sort(key=lambda one: one[0])
    seconds, loaded = found[len(found) // 2]
    return seconds, loaded


def equal_everywhere(tokens: Any, rerender: Any, batch: int = 256) -> tuple[int, str | None, float]:
    """Every served dict of ``tokens`` against ``rerender``'s, position by position: how many, the
    first mismatch (or None), seconds."""
    started = time.perf_counter()
    if len(tokens) != len(rerender):
        return 0, f"{len(tokens)} training entries from tokens, {len(rerender)} re-rendered", 0.0
    for start in range(0, len(tokens), batch):
        positions = list(range(start, min(start + batch, len(tokens))))
        for position, ours, theirs in zip(positions, tokens[positions], rerender[positions]):
            if ours != theirs:
                keys = sorted(k for k in {*ours, *theirs} if ours.get(k) != theirs.get(k))
                return position, f"position {position} differs in {', '.join(keys)}", time.perf_counter() - started
    return len(tokens), None, time.perf_counter() - started


def ratio_line(label: str, ours: float, theirs: float, fmt: str, target: str, met: bool,
               higher_is_better: bool = True) -> tuple[str, ...]:
    over = theirs if higher_is_better else ours
    ratio = f"{(ours if higher_is_better else theirs) / over:.1f}x" if over else "-"  # a growth of 0.0 MiB
    return (label, format(ours, fmt), format(theirs, fmt), ratio, target, "met" if met else "MISSED")


def tokens_table(work: Path, rows: int, fetches: int, loader: int) -> tuple[int, list[tuple[str, ...]], list[str]]:
    """The stored-tokens table: its entries, lines ``(figure, tokens, re-render, ratio, target,
    verdict)``, and notes (the modules check, the equality check)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers import train_tokenizer

    from dataidx import Collator, DataEngine
    from dataidx.index import build
    from dataidx.render import CHATML

    folder = work / "tokens"
    folder.mkdir()
    config = generate(folder, rows, rows // 4)
    corpus = [json.loads(line)["output"] for _, line in zip(range(5000), (folder / "alpaca.jsonl").open())]
    tokenizer = folder / "tokenizer"
    train_tokenizer(tokenizer, vocab_size=8000, chat_template=CHATML, corpus=corpus)
    wide = folder / "tokenizer32"
    wide_vocabulary = wide_tokenizer(tokenizer, wide)
    store = folder / "tokens.db"
    build(config, store)

    before = store_bytes(store)
    render_seconds(store, tokenizer, RERENDER, store_tokens=False)
    lengths_only = store_bytes(store) - before
    size16 = added_tokens_size(store, tokenizer, TOKENS)
    size32 = added_tokens_size(store, wide, TOKENS32)
    pairs = render_turns(store, tokenizer)
    for name, store_tokens in ((RERENDER_QWEN, False), (TOKENS_QWEN, True)):
        render_seconds(store, tokenizer, name, store_tokens, template=str(QWEN_TEMPLATE))

    served, rendered = DataEngine(store, render=TOKENS), DataEngine(store, render=RERENDER)
    entries = len(served)
    rng = random.Random(1)
    indices = [rng.randrange(entries) for _ in range(fetches)]
    lines: list[tuple[str, ...]] = []
    list_rates: list[float] = []  # re-rendering through 2 workers, per template
    with DataEngine(store, render=TOKENS_QWEN) as served_qwen, DataEngine(store, render=RERENDER_QWEN) as qwen:
        for template, ours_engine, theirs_engine, verdict in (
                ("a model's own template (Qwen2.5, Jinja)", served_qwen, qwen, True),
                ("built-in ChatML (plain-Python fast path)", served, rendered, False)):
            lines.append((f"fetches, re-render under {template}:", "", "", "", "", ""))
            for label, batch, target in (("  engine[i], random (samples/s)", 1, 20),
                                         ("  engine[list of 256], random (samples/s)", 256, 20)):
                ours, theirs = rates([(ours_engine, indices), (theirs_engine, indices)], batch)
                line = ratio_line(label, ours, theirs, ",.0f", f">= {target}x", ours / theirs >= target)
                lines.append(line if verdict else line[:4] + ("", ""))
            ours_rate, ours_growth = loader_run(ours_engine, loader)
            theirs_rate, theirs_growth = loader_run(theirs_engine, loader)
            line = ratio_line("  DataLoader, 2 workers, batch 32, random (samples/s)", ours_rate, theirs_rate, ",.0f",
                              ">= 10x", ours_rate / theirs_rate >= 10)
            lines.append(line if verdict else line[:4] + ("", ""))
            list_rates.append(theirs_rate)
            # Each path at its best: a fetch from tokens costs less than moving a sample between
            # processes, so it is fastest in the training process; re-rendering needs the workers.
            ours_rate, _ = loader_run(ours_engine, loader, workers=0)
            lines.append(ratio_line("  DataLoader, each at its best: tokens in-process, re-render 2 workers",
                                    ours_rate, theirs_rate, ",.0f", "", True)[:4] + ("", ""))
            collator = Collator(pad_token_id=0)
            theirs_rate, _ = loader_run(theirs_engine, loader, collate=collator)
            for workers in (2, 0):
                ours_rate, _ = loader_run(ours_engine, loader, workers=workers, collate=collator)
                where = "2 workers both" if workers else "tokens in-process, re-render 2 workers"
                lines.append(ratio_line(f"  DataLoader + Collator (a trainer's batches), {where}", ours_rate,
                                        theirs_rate, ",.0f", "", True)[:4] + ("", ""))
    # What the loader costs by itself with these dicts (workers pickle ~4 lists of ~130 ints a sample).
    ceiling, _ = loader_run(PrefetchedDataset(served[: min(entries, 5000)], entries), loader)
    lines.append(ratio_line("  ceiling: 2 workers over dicts fetched in advance, against Qwen2.5's re-render",
                            ceiling, list_rates[0], ",.0f", "", True)[:4] + ("", ""))
    lines.append(ratio_line("  private memory growth of a worker (MiB)", ours_growth, theirs_growth, ".1f",
                            "<= 5 MiB", ours_growth <= 5, higher_is_better=False))
    for label, size, target in (("16-bit", size16, None), (f"32-bit ({wide_vocabulary:,} ids)", size32, 4.5)):
        lines.append((f"size on disk, {label} words: (file + store growth) / token", f"{size['per_token']:.3f}",
                      f"{lengths_only / size['tokens']:.3f}", "", f"<= {target}" if target else "",
                      ("met" if size["per_token"] <= target else "MISSED") if target else ""))
        lines.append(("  token file bytes / store's growth, pages in use, adding the tokens", f"{size['file']:,}",
                      f"{size['growth']:,}", "", "", ""))
    best_tokens, best_alone = min(t for t, _ in pairs), min(a for _, a in pairs)
    slower = best_tokens / best_alone
    lines.append(("render --store-tokens / render alone (s, best of 3)", f"{best_tokens:.2f}", f"{best_alone:.2f}",
                  f"{slower:.2f}x", "<= 1.2x", "met" if slower <= 1.2 else "MISSED"))
    lines.append(("  pair by pair", " ".join(f"{t / a:.2f}" for t, a in pairs), "", "", "", ""))
    open_tokens, loaded = first_sample(store, TOKENS, runs=repeats(3))
    open_rendered, loaded_rendered = first_sample(store, RERENDER, runs=1)
    lines.append(ratio_line("open -> first rendered sample, fresh process (ms)", 1000 * open_tokens,
                            1000 * open_rendered, ".1f", "<= 20 ms", open_tokens <= 0.020, higher_is_better=False))
    count, mismatch, seconds = equal_everywhere(served, rendered)
    notes = [
        f"modules loaded after serving from tokens: {', '.join(loaded) or 'none'} of {', '.join(RENDERING_MODULES)} "
        f"({'met' if not loaded else 'MISSED'}); re-rendering loaded {', '.join(loaded_rendered) or 'none'}",
        (f"equality: all {count:,} equal" if mismatch is None else f"equality: MISMATCH, {mismatch}")
        + f" (every training entry, both paths, batches of 256: {seconds:.1f} s)",
        "re-render column of the size rows: the store's growth from rendering the spec alone (lengths), per token",
    ]
    return entries, lines, notes

"""Rendering against its ceiling: ``dataidx render`` entries/s beside one ``encode_batch`` pass of
the same tokenizer over the same texts (each entry's whole chat text, once), under the built-in
ChatML and real families' own Jinja templates (tests/conformance: tokenizers built like theirs).

    python scripts/bench.py --render-only              # this table alone

Per template, in turns (a shared machine moves single runs): ``dataidx render`` at default jobs
and the ceiling; best of two each. Then, in one process, ``Renderer.render_many``
tokenizing every text whole (v1's two passes, the way dataidx rendered before issue 30) against
one pass per shared prefix, on the same entries.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

#: The templates of the table: the built-in ChatML (rendered in Python) and models' own Jinja.
TEMPLATES = ("chatml", "qwen3", "llama3_1", "gemma3")


def render_ratio_table(work: Path, rows: int) -> tuple[int, list[tuple[str, ...]]]:
    """``(entries, lines)``: per template, render entries/s beside the ceiling."""
    from bench import generate

    from dataidx.index import build
    from dataidx.read import EntryReader

    folder = work / "render-ratio"
    folder.mkdir(parents=True)
    store = folder / "ratio.db"
    build(generate(folder, rows, rows // 4), store)
    with EntryReader(store) as reader:
        samples = [(reader.sample(dataset, row, cut), cut is not None)
                   for _, dataset, row, cut in reader.entries_between(1, 2**62)]
    return len(samples), [_template_line(slug, store, folder, samples) for slug in TEMPLATES]


def _template_line(slug: str, store: Path, folder: Path, samples: list[tuple[dict, bool]]) -> tuple[str, ...]:
    from tests.conformance import build_tokenizer, template_text

    from dataidx.render import CHATML, Renderer, RenderRequest, load_tokenizer, render_store

    tokenizer_path = build_tokenizer("qwen2_5" if slug == "chatml" else slug, folder / slug)
    tokenizer = load_tokenizer(tokenizer_path)
    text = CHATML if slug == "chatml" else template_text(slug)
    exact = Renderer(tokenizer, text, cutoff=4096)
    wholes = [side.full for sample, cut in samples for draft in [exact.draft(sample, cut)]
              if isinstance(draft, dict) for side in draft.values()]

    def ceiling() -> float:
        started = time.perf_counter()
        for start in range(0, len(wholes), 4000):
            exact.backend.encode_batch(wholes[start:start + 4000], add_special_tokens=False)
        return len(samples) / (time.perf_counter() - started)

    def rendered(attempt: int) -> float:
        summary = render_store(RenderRequest(store, tokenizer_path, cutoff=4096,
                                             template="chatml" if slug == "chatml" else None, name=f"{slug}-{attempt}"))
        return summary.entries / summary.seconds

    from bench import repeats  # here: bench imports this module
    runs = [(rendered(attempt), ceiling()) for attempt in range(repeats(2))]
    ours, top = (max(run[k] for run in runs) for k in range(2))
    twice = Renderer(tokenizer, text, cutoff=4096)
    twice.shared.usable = False  # every text tokenized whole: v1's two passes
    one, two = (_in_process(renderer, samples[:6000]) for renderer in (exact, twice))
    return slug, f"{ours:,.0f}", f"{top:,.0f}", f"{ours / top:.2f}", f"{two:,.0f} -> {one:,.0f} ({one / two:.2f}x)"


def _in_process(renderer: object, samples: list[tuple[dict, bool]]) -> float:
    """Entries/s of ``render_many`` in batches of 256, one process (best of two)."""
    from bench import repeats  # here: bench imports this module
    best = 0.0
    for _ in range(repeats(2)):
        started = time.perf_counter()
        for start in range(0, len(samples), 256):
            renderer.render_many(samples[start:start + 256])  # type: ignore[attr-defined]
        best = max(best, len(samples) / (time.perf_counter() - started))
    return best


RATIO_HEADER = ("template", "render entries/s", "ceiling entries/s", "ratio (target >= 0.8)",
                "1 process: two passes -> one per prefix")

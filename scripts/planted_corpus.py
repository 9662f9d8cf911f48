"""A planted corpus for dedup and decontamination (issue 55): alpaca rows of Zipf-distributed
words (so word 5-grams are mostly unique, as in real text), with copies and leaks planted where
the truth is known.

- ``originals``: the rows, one dataset.
- ``copies``: a second dataset after it, of rows copied from ``originals``: exact copies (10% of
  the originals), near copies (10%: words replaced until their exact 5-gram Jaccard with the
  original is in [0.80, 0.95], measured), hard negatives (2%: Jaccard in [0.55, 0.78], which must
  not be grouped), and the same prompts with other answers (1%, which must not be grouped either).
- an eval set of items (10-70 words); 1% of the originals hold one whole in their answer and
  0.5% a fragment of one (10-30% of its words, which is not a leak at 0.5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dataidx.dedup.near import jaccard
from dataidx.dedup.shingles import ngram_hashes, word_hashes

VOCABULARY = 60_000


@dataclass
class Planted:
    """What was planted: copy rows (index in ``copies``) by kind, each with its original's index;
    leaking originals with their item."""

    copies: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    leaks: dict[int, int] = field(default_factory=dict)
    fragments: dict[int, int] = field(default_factory=dict)


class Words:
    """Text of Zipf-distributed words from a fixed vocabulary."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        lengths = rng.integers(2, 10, VOCABULARY)
        self.vocabulary = ["".join(rng.choice(letters, length)) for length in lengths]
        self.words_array = np.array(self.vocabulary, dtype=object)
        ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
        self.weights = ranks ** -1.05 / (ranks ** -1.05).sum()
        self.cumulative = np.cumsum(self.weights)  # drawn by search: a choice with p= sums 60k weights a call

    def ids(self, count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cumulative, self.rng.random(count)), VOCABULARY - 1)

    def text(self, words: int) -> str:
        """``words`` words in sentences of 4-22, each ended by a stop, a comma or a question mark:
        one join a text (a join a sentence made a 2M-row corpus take half an hour)."""
        chosen = self.words_array[self.ids(words)]
        ends = np.cumsum(self.rng.integers(4, 23, size=words // 4 + 2))
        ends = ends[ends < words]
        chosen[ends - 1] = np.char.add(chosen[ends - 1], self.rng.choice(np.array([".", ".", ",", "?"]), len(ends)))
        chosen[-1] = chosen[-1] + "."
        return " ".join(chosen.tolist()).capitalize()

    def replaced(self, text: str, share: float) -> str:
        words = text.split()
        places = self.rng.choice(len(words), size=max(1, int(len(words) * share)), replace=False)
        for at, word in zip(places.tolist(), self.ids(len(places)).tolist()):
            words[at] = self.vocabulary[word]
        return " ".join(words)


def _whole(row: dict[str, str]) -> str:
    return f"{row['instruction']}\n{row['input']}\n{row['output']}"


def _ngrams(text: str) -> np.ndarray:
    return np.unique(ngram_hashes(*word_hashes([text]), 5)[0])


def _edited(words: Words, row: dict[str, str], low: float, high: float) -> dict[str, str] | None:
    """``row`` with words replaced until its 5-gram Jaccard with ``row`` is in ``[low, high]``."""
    original = _ngrams(_whole(row))
    for share in np.linspace(0.01, 0.3, 30):
        edited = {**row, "instruction": words.replaced(row["instruction"], share),
                  "output": words.replaced(row["output"], share)}
        found = jaccard(original, _ngrams(_whole(edited)))
        if low <= found <= high:
            return edited
        if found < low:
            return None
    return None


def generate(folder: Path, rows: int, items: int = 5_000, seed: int = 0) -> tuple[Path, Path, Planted]:
    """Write the corpus into ``folder``: ``(YAML of both datasets, eval set .jsonl, truth)``."""
    rng = np.random.default_rng(seed)
    words = Words(rng)
    originals = [{"instruction": words.text(int(rng.integers(8, 60))), "input": "",
                  "output": words.text(int(rng.integers(30, 300)))} for _ in range(rows)]
    evals = [words.text(int(rng.integers(10, 70))) for _ in range(items)]
    planted = Planted(copies={"exact": [], "near": [], "hard_negative": [], "prompt_only": []})
    chosen = rng.permutation(rows)
    leaking, fragments = chosen[: rows // 100], chosen[rows // 100: rows // 100 + rows // 200]
    for row in leaking.tolist():
        item = int(rng.integers(items))
        originals[row]["output"] += " " + evals[item]
        planted.leaks[row] = item
    for row in fragments.tolist():
        item = int(rng.integers(items))
        item_words = evals[item].split()
        size = max(1, int(len(item_words) * rng.uniform(0.1, 0.3)))
        start = int(rng.integers(0, len(item_words) - size + 1))
        originals[row]["output"] += " " + " ".join(item_words[start:start + size])
        planted.fragments[row] = item
    sources = rng.permutation(rows)
    copies: list[dict[str, str]] = []
    counts = {"exact": rows // 10, "near": rows // 10, "hard_negative": rows // 50, "prompt_only": rows // 100}
    at = 0
    for kind, count in counts.items():
        made = 0
        while made < count and at < rows:
            source = int(sources[at])
            at += 1
            row = originals[source]
            if kind == "exact":
                copy: dict[str, str] | None = dict(row)
            elif kind == "near":
                copy = _edited(words, row, 0.80, 0.95)
            elif kind == "hard_negative":
                copy = _edited(words, row, 0.55, 0.78)
            else:
                copy = {**row, "output": words.text(len(row["output"].split()))}
            if copy is None:
                continue
            planted.copies[kind].append((len(copies), source))
            copies.append(copy)
            made += 1
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("originals", originals), ("copies", copies)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data))
    (folder / "eval.jsonl").write_text("".join(json.dumps({"question": item}) + "\n" for item in evals))
    (folder / "truth.json").write_text(json.dumps({"copies": planted.copies, "leaks": planted.leaks,
                                                   "fragments": planted.fragments}))
    config = folder / "planted.yaml"
    config.write_text("".join(f"{name}:\n  path: {folder / (name + '.jsonl')}\n  source: local\n  converter: alpaca\n"
                              for name in ("originals", "copies")))
    return config, folder / "eval.jsonl", planted

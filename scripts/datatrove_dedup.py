"""datatrove's MinHash dedup (its four steps: signatures, buckets, clusters, filter) on a planted
corpus that scripts/planted_corpus.py wrote, for scripts/bench_dedup.py's side-by-side table.

Run by an interpreter that has datatrove (it is not a dependency of dataidx; `pip install
datatrove regex tokenizers orjson 'xxhash<4'`, and spacy for its default word tokenizer):

    /path/to/datatrove-venv/bin/python scripts/datatrove_dedup.py CORPUS_FOLDER [ws|spacy]

Prints one JSON line: seconds, and by row, recall per planted kind and precision, scored as
bench_dedup.py scores dataidx (a planted pair is found when one of its two rows is removed;
a removed row outside every exact or near pair is a false duplicate).
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import time
from pathlib import Path

from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.word_tokenizers import WordTokenizer


class Whitespace(WordTokenizer):
    """Words split at whitespace (datatrove lowercases and strips punctuation before)."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        raise NotImplementedError


def main() -> None:
    corpus, tokenizer = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "ws")
    work = corpus / f"datatrove-{tokenizer}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "input").mkdir(parents=True)
    with open(work / "input" / "rows.jsonl", "w") as out:
        for name in ("originals", "copies"):
            for number, line in enumerate((corpus / f"{name}.jsonl").read_text().splitlines()):
                row = json.loads(line)
                text = f"{row['instruction']}\n{row['input']}\n{row['output']}"
                out.write(json.dumps({"id": f"{name}:{number}", "text": text}) + "\n")
    config = MinhashConfig(hash_config=HashConfig(precision=64), num_buckets=14, hashes_per_bucket=8, n_grams=5)
    language = Whitespace() if tokenizer == "ws" else "en"
    started = time.perf_counter()
    steps = [
        ([JsonlReader(str(work / "input")), MinhashDedupSignature(str(work / "sigs"), config=config,
                                                                  language=language)], 1),
        ([MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)], config.num_buckets),
        ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=config)], 1),
        ([JsonlReader(str(work / "input")), MinhashDedupFilter(str(work / "remove"),
                                                               exclusion_writer=JsonlWriter(str(work / "removed"))),
          JsonlWriter(str(work / "kept"))], 1),
    ]
    for number, (pipeline, tasks) in enumerate(steps):
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=min(tasks, 2),
                              logging_dir=str(work / "logs" / str(number)), skip_completed=False).run()
    seconds = time.perf_counter() - started
    removed = set()
    for path in (work / "removed").glob("*.jsonl*"):
        opened = gzip.open(path, "rt") if path.suffix == ".gz" else open(path)
        with opened as lines:
            removed.update(json.loads(line)["id"] for line in lines)
    truth = json.loads((corpus / "truth.json").read_text())
    pairs = {kind: [(f"copies:{copy}", f"originals:{source}") for copy, source in found]
             for kind, found in truth["copies"].items()}
    recall = {kind: sum(1 for a, b in found if a in removed or b in removed) / max(1, len(found))
              for kind, found in pairs.items()}
    true_rows = {row for kind in ("exact", "near") for pair in pairs[kind] for row in pair}
    print(json.dumps({"tool": f"datatrove ({tokenizer} words, 14x8)", "seconds": seconds, "recall": recall,
                      "precision": sum(1 for row in removed if row in true_rows) / max(1, len(removed))}))


if __name__ == "__main__":
    main()

"""``dataidx decontaminate``: the rows of a store that hold an item of an eval set, found and
stored as a named list with, per entry and set, the item, its score and the span found.

One pass over every row (forked processes) looks each row's text, its prompt and supervised
text together, up in every eval set's index (:mod:`.leaks`); every entry of a row with an item
at the threshold or above is recorded (:class:`~dataidx.store.Evidence`). Nothing is deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from ..errors import UsageError
from ..progress import CountProgress
from ..read import EntryReader
from ..store import Datasets, Evidence, rewriting
from .eval_sets import EvalSet
from .leaks import COMMON_ITEMS, EvalIndex
from .rows import Row, RowPass, row_texts

#: Words per n-gram, and the least score recorded, unless asked otherwise.
NGRAM, THRESHOLD = 8, 0.5


class _Lookup:
    """What a worker holds: each eval set's index and the threshold."""

    def __init__(self, indexes: dict[str, EvalIndex], threshold: float) -> None:
        self.indexes, self.threshold = indexes, threshold

    def __call__(self, reader: EntryReader, rows: list[Row]) -> list[tuple[Row, str, int, float, str]]:
        """A range's leaking rows: per row and eval set, ``(row, set, item, score, span)``."""
        texts = row_texts(reader, rows)
        kept = [(row, text.whole) for row, text in zip(rows, texts) if text is not None]
        found = []
        for name, index in self.indexes.items():
            for match in index.best([text for _, text in kept], self.threshold):
                found.append((kept[match.row][0], name, match.item, match.score, match.span))
        return found


def find_leaks(store: str | os.PathLike[str], name: str, eval_sets: Sequence[EvalSet], *, n: int = NGRAM,
                  threshold: float = THRESHOLD, jobs: int | None = None,
                  progress: CountProgress | None = None) -> Evidence.StoredRun:
    """Find the rows of ``store`` that hold items of ``eval_sets`` (score at ``threshold`` or
    above, in word ``n``-grams) and store them as list ``name``; its record."""
    if not 0 < threshold <= 1:
        raise UsageError(f"--threshold {threshold}: a share of an item's words above 0 and at most 1")
    if not 3 <= n <= 50:
        raise UsageError(f"--n {n}: words per n-gram, from 3 to 50")
    if not eval_sets:
        raise UsageError("give at least one --eval NAME=FILE[:FIELD]")
    names = [one.name for one in eval_sets]
    if len(set(names)) != len(names):
        raise UsageError(f"--eval: two eval sets are named '{next(x for x in names if names.count(x) > 1)}'")
    started = time.perf_counter()
    indexes = {one.name: EvalIndex(one.items, n) for one in eval_sets}
    with EntryReader(store) as reader:
        Evidence(reader.handle).refuse_taken(name)
        span = Datasets(reader.handle).entry_range()
        total, done, leaks = 0 if span is None else span[1] - span[0] + 1, 0, []
        for entries, found in RowPass(reader, _Lookup(indexes, threshold)).run(max(1, jobs or os.cpu_count() or 1)):
            leaks.extend(found)
            done += entries
            if progress is not None:
                progress(done, total)
        read = reader.identity
    rows = [(entry, eval_set, item, score, text) for row, eval_set, item, score, text in leaks
            for entry in range(row.first, row.first + row.entries)]
    params = {"n": n, "threshold": threshold, "words": "\\w runs, lowercased", "common_items": COMMON_ITEMS,
              "eval_sets": {one.name: {"file": str(one.path.resolve()), "sha256": one.sha256, "field": one.field,
                                       "items": len(one.items), "shorter_than_n": indexes[one.name].short,
                                       "template_ngrams": indexes[one.name].common} for one in eval_sets},
              "rows": len({row.first for row, *_ in leaks})}
    with rewriting(store, unchanged=read, task="finding leaks", command="decontaminate") as connection:
        return Evidence(connection).save_leaks(name, params, rows, seconds=time.perf_counter() - started)

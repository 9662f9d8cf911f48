"""What a mixture is made of, per dataset: entries, share, distinct rows, repeats and coverage,
over every epoch or of one, and with a render spec the tokens each dataset trains on.

The SQL reads the same in SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from .connect import reading
from .handle import Store, StoreHandle
from .mixtures.records import REASONING_COLUMNS, Mixtures, StoredMixture
from .specs.reasoning import REASONING_PROBLEM_SUMS

# One row per dataset: mixture_datasets holds the counts over every epoch, epoch_datasets each
# epoch's, both made when the mixture was written. Coverage: distinct rows seen out of all rows.
_ALL_EPOCHS = """
SELECT d.name AS dataset, md.entries AS entries, round(md.entries * 1.0 / m.entries, 6) AS share,
       md.base_entries AS base_entries, md.distinct_entries AS distinct_entries, md.distinct_rows AS distinct_rows,
       md.max_repeats AS max_repeats, round(md.distinct_rows * 1.0 / nullif(d.rows - d.rejected, 0), 6) AS coverage
FROM mixture_datasets AS md
JOIN mixtures AS m ON m.id = md.mixture_id
JOIN datasets AS d ON d.id = md.dataset_id
WHERE m.name = {mark} AND md.entries > 0
ORDER BY d.position
"""

_ONE_EPOCH = """
SELECT d.name AS dataset, ed.entries AS entries, round(ed.entries * 1.0 / nullif(me.entries, 0), 6) AS share,
       md.base_entries AS base_entries, ed.distinct_entries AS distinct_entries, ed.distinct_rows AS distinct_rows,
       ed.max_repeats AS max_repeats, round(ed.distinct_rows * 1.0 / nullif(d.rows - d.rejected, 0), 6) AS coverage
FROM epoch_datasets AS ed
JOIN mixtures AS m ON m.id = ed.mixture_id
JOIN mixture_epochs AS me ON me.mixture_id = ed.mixture_id AND me.epoch = ed.epoch
JOIN mixture_datasets AS md ON md.mixture_id = ed.mixture_id AND md.dataset_id = ed.dataset_id
JOIN datasets AS d ON d.id = ed.dataset_id
WHERE m.name = {mark} AND ed.epoch = {mark} AND ed.entries > 0
ORDER BY d.position
"""

# Tokens as the mixture recorded them when drawn under its own spec.
_STORED_TOKENS = """
SELECT d.name, sum(ed.training_entries), sum(ed.tokens), sum(ed.supervised_tokens)
FROM epoch_datasets AS ed
JOIN mixtures AS m ON m.id = ed.mixture_id
JOIN datasets AS d ON d.id = ed.dataset_id
WHERE m.name = {mark} AND ed.epoch BETWEEN {mark} AND {mark}
GROUP BY d.id, d.name
"""

# Tokens under any spec: a stretch of positions read as runs (entry ranges) and explicit
# positions, each joined to the spec's lengths by range.
_COUNTED_TOKENS = """
WITH spans AS (
    SELECT r.first_entry AS lo, r.first_entry + r.length - 1 AS hi FROM mixture_runs AS r
    WHERE r.mixture_id = {mark} AND r.start BETWEEN {mark} AND {mark}
    UNION ALL
    SELECT e.entry_id, e.entry_id FROM mixture_entries AS e WHERE e.id BETWEEN {mark} AND {mark}
)
SELECT d.name, count(*), sum(l.tokens), sum(l.supervised_tokens), count(l.reasoning),
       sum(CASE WHEN l.reasoning IS NULL THEN 0 ELSE l.tokens END)""" + REASONING_PROBLEM_SUMS + """
FROM spans CROSS JOIN entry_renders AS l CROSS JOIN datasets AS d
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi
  AND l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1 AND l.status IN ({trains})
GROUP BY d.id, d.name
"""


def composition(store: Store | StoreHandle, mixture: str = "default", *, epoch: int | None = None,
                spec: str | None = None) -> list[dict[str, Any]]:
    """One dict per dataset of ``mixture`` with the keys of :data:`COMPOSITION_COLUMNS`: over
    every epoch, or of epoch ``epoch``. With ``spec`` (a stored render spec) also the keys of
    :data:`TOKEN_COLUMNS` and :data:`REASONING_COLUMNS`: what a training run on that spec spends
    on each dataset, and what became of the reasoning it trains on.

    Example::

        for row in composition("demo.db", spec="default"):
            print(row["dataset"], row["share"], row["share_of_tokens"], row["reasoning_dropped"])
    """
    with reading(store) as handle:
        found = Mixtures(handle).get(mixture, 0 if epoch is None else epoch)
        tokens = None if spec is None else _tokens(handle, found, spec, epoch)
        composed = handle.dicts(_ALL_EPOCHS, mixture) if epoch is None else handle.dicts(_ONE_EPOCH, mixture, epoch)
    if tokens is not None:
        total = sum(counts[1] for counts in tokens.values()) or None
        empty = (0,) * (3 + len(REASONING_COLUMNS) - 2)
        for row in composed:
            training, spent, supervised, reasoning, reasoning_tokens, *problems = tokens.get(row["dataset"], empty)
            row.update(training_entries=training, tokens=spent, supervised_tokens=supervised,
                       share_of_tokens=None if total is None else round(spent / total, 6),
                       reasoning_entries=reasoning, reasoning_tokens=reasoning_tokens,
                       plain_entries=training - reasoning, plain_tokens=spent - reasoning_tokens,
                       **dict(zip(REASONING_COLUMNS[4:], problems)))
    return composed


def _tokens(handle: StoreHandle, mixture: StoredMixture, spec: str, epoch: int | None) -> dict[str, tuple[int, ...]]:
    """Per dataset: training entries, tokens and supervised tokens of the mixture (or one epoch)
    under ``spec`` (from what the mixture recorded when it was drawn under that very spec), then
    the entries with reasoning, their tokens and the count of each reasoning problem. Reasoning is
    counted over the positions' entry ranges (a range scan of ``entry_renders``, once)."""
    found = handle.one(
        "SELECT s.id, s.fingerprint, m.spec, m.spec_fingerprint, m.start, m.entries FROM render_specs AS s "
        "CROSS JOIN mixtures AS m WHERE s.name = {mark} AND m.id = {mark}", spec, mixture.id)
    if found is None:
        raise handle.missing("render_specs", "render spec", spec, "; run dataidx render")
    spec_id, fingerprint, drawn_under, drawn_fingerprint, start, positions = found
    first, last = (start, start + positions - 1) if epoch is None else \
        (mixture.start, mixture.start + mixture.positions - 1)
    rows = handle.all(_COUNTED_TOKENS, mixture.id, first, last, first, last, spec_id)
    counted = {name: tuple(int(value or 0) for value in counts) for name, *counts in rows}
    if (drawn_under, drawn_fingerprint) == (spec, fingerprint):  # the tokens as the mixture recorded them
        epochs = (0, mixture.epochs - 1) if epoch is None else (epoch, epoch)
        rows = handle.all(_STORED_TOKENS, mixture.name, *epochs)
        empty = (0,) * (3 + len(REASONING_COLUMNS) - 2)
        counted = {name: (*(int(value or 0) for value in stored), *counted.get(name, empty)[3:])
                   for name, *stored in rows}
    return counted


# The counts again, from every position: what verify compares the stored ones with.
_RECOUNT = """
WITH per_entry AS (
    SELECT p.mixture_id, p.entry_id, count(*) AS n FROM mixture_positions AS p GROUP BY p.mixture_id, p.entry_id
),
counted AS (
    SELECT e.mixture_id, b.dataset_id, sum(e.n) AS entries, count(*) AS distinct_entries,
           count(DISTINCT b.row) AS distinct_rows, max(e.n) AS max_repeats
    FROM per_entry AS e JOIN base_entries AS b ON b.id = e.entry_id
    GROUP BY e.mixture_id, b.dataset_id
)
SELECT m.name, d.name, md.entries, md.distinct_entries, md.distinct_rows, md.max_repeats,
       coalesce(c.entries, 0), coalesce(c.distinct_entries, 0), coalesce(c.distinct_rows, 0), coalesce(c.max_repeats, 0)
FROM mixture_datasets AS md
JOIN mixtures AS m ON m.id = md.mixture_id
JOIN datasets AS d ON d.id = md.dataset_id
LEFT JOIN counted AS c ON c.mixture_id = md.mixture_id AND c.dataset_id = md.dataset_id
"""

# The same per epoch, for mixtures of more than one (of one, epoch 0 is the whole mixture).
_EPOCH_RECOUNT = """
WITH per_entry AS (
    SELECT p.mixture_id, me.epoch, p.entry_id, count(*) AS n
    FROM mixture_positions AS p
    JOIN mixtures AS m ON m.id = p.mixture_id AND m.epochs > 1
    JOIN mixture_epochs AS me ON me.mixture_id = p.mixture_id AND p.id BETWEEN me.start AND me.start + me.entries - 1
    GROUP BY p.mixture_id, me.epoch, p.entry_id
),
counted AS (
    SELECT e.mixture_id, e.epoch, b.dataset_id, sum(e.n) AS entries, count(*) AS distinct_entries,
           count(DISTINCT b.row) AS distinct_rows, max(e.n) AS max_repeats
    FROM per_entry AS e JOIN base_entries AS b ON b.id = e.entry_id
    GROUP BY e.mixture_id, e.epoch, b.dataset_id
)
SELECT m.name || ' (epoch ' || ed.epoch || ')', d.name, ed.entries, ed.distinct_entries, ed.distinct_rows,
       ed.max_repeats, coalesce(c.entries, 0), coalesce(c.distinct_entries, 0), coalesce(c.distinct_rows, 0),
       coalesce(c.max_repeats, 0)
FROM epoch_datasets AS ed
JOIN mixtures AS m ON m.id = ed.mixture_id AND m.epochs > 1
JOIN datasets AS d ON d.id = ed.dataset_id
LEFT JOIN counted AS c ON c.mixture_id = ed.mixture_id AND c.epoch = ed.epoch AND c.dataset_id = ed.dataset_id
"""


def composition_problems(handle: StoreHandle) -> list[str]:
    """Every (mixture, dataset), and per epoch of a mixture of several, whose stored counts differ
    from a recount of its positions."""
    problems = []
    for recount in (_RECOUNT, _EPOCH_RECOUNT):
        for mixture, dataset, *counts in handle.all(recount):
            stored, recounted = tuple(counts[:4]), tuple(counts[4:])
            if stored != recounted:
                problems.append(f"mixture '{mixture}', dataset '{dataset}': stored (entries, distinct entries, "
                                f"distinct rows, max repeats) {stored} but its positions give {recounted}")
    return problems

"""What a mixture is made of, per dataset: entries, share, distinct rows and repeats.

The SQL reads the same in SQLite and PostgreSQL."""

from __future__ import annotations

import os
from typing import Any

from .connect import connect_readonly
from .dialect import ReadConnection
from .query import run_query
from .records import read_mixture

COMPOSITION_COLUMNS = ("dataset", "entries", "share", "base_entries", "distinct_entries", "distinct_rows", "max_repeats")

# One row per dataset: mixture_datasets holds the counts, made when the mixture was written.
_SQL = """
SELECT d.name AS dataset, md.entries AS entries, round(md.entries * 1.0 / m.entries, 6) AS share,
       md.base_entries AS base_entries, md.distinct_entries AS distinct_entries, md.distinct_rows AS distinct_rows,
       md.max_repeats AS max_repeats
FROM mixture_datasets AS md
JOIN mixtures AS m ON m.id = md.mixture_id
JOIN datasets AS d ON d.id = md.dataset_id
WHERE m.name = :mixture AND md.entries > 0
ORDER BY d.position
"""


def composition(store: str | os.PathLike[str], mixture: str = "default") -> list[dict[str, Any]]:
    """One dict per dataset of ``mixture`` with the keys of :data:`COMPOSITION_COLUMNS`.

    Example::

        for row in composition("demo.db"):
            print(row["dataset"], row["share"])
    """
    connection = connect_readonly(store)
    try:
        read_mixture(connection, mixture, store)  # a NotFoundError naming the mixtures there are
    finally:
        connection.close()
    columns, rows = run_query(store, _SQL, {"mixture": mixture})
    return [dict(zip(columns, row)) for row in rows]



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


def composition_problems(connection: ReadConnection) -> list[str]:
    """Every (mixture, dataset) whose stored counts differ from a recount of its positions."""
    problems = []
    for mixture, dataset, *counts in connection.execute(_RECOUNT).fetchall():
        stored, recounted = tuple(counts[:4]), tuple(counts[4:])
        if stored != recounted:
            problems.append(f"mixture '{mixture}', dataset '{dataset}': stored (entries, distinct entries, distinct "
                            f"rows, max repeats) {stored} but its positions give {recounted}")
    return problems

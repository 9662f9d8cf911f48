"""What a mixture is made of, per dataset: entries, share, distinct rows and repeats.

The SQL reads the same in SQLite and PostgreSQL."""

from __future__ import annotations

import os
from typing import Any

from .connect import connect_readonly
from .query import run_query
from .records import read_mixture

COMPOSITION_COLUMNS = ("dataset", "entries", "share", "base_entries", "distinct_entries", "distinct_rows", "max_repeats")

_SQL = """
WITH m AS (SELECT id, entries FROM mixtures WHERE name = :mixture),
per_entry AS (
    SELECT p.entry_id, count(*) AS n FROM mixture_positions AS p, m WHERE p.mixture_id = m.id GROUP BY p.entry_id
)
SELECT d.name AS dataset, sum(p.n) AS entries, round(sum(p.n) * 1.0 / m.entries, 6) AS share,
       md.base_entries AS base_entries, count(*) AS distinct_entries, count(DISTINCT b.row) AS distinct_rows,
       max(p.n) AS max_repeats
FROM per_entry AS p
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
CROSS JOIN m
JOIN mixture_datasets AS md ON md.mixture_id = m.id AND md.dataset_id = d.id
GROUP BY d.id, d.name, d.position, m.entries, md.base_entries
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


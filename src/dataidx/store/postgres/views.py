"""The documented views in PostgreSQL's dialect, for stores published into a schema.

The SQLite views (``schema.sql``) are the reference; most read the same in PostgreSQL. Four
differ: PostgreSQL wants every selected column grouped or functionally dependent on a grouped
primary key, and has no ``round(real, n)``.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection

from ..schema import schema_script

_OVERRIDES = {
    "turns": """
SELECT d.name AS dataset, b.row AS row, count(*) AS entries, max(b.cut) AS last_cut
FROM base_entries AS b
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY d.id, b.row""",
    "composition": """
SELECT m.name AS mixture, d.name AS dataset, md.entries AS entries, md.distinct_rows AS distinct_rows,
       CAST(round(CAST(md.entries AS numeric) / m.entries, 6) AS double precision) AS share
FROM mixture_datasets AS md
JOIN mixtures AS m ON m.id = md.mixture_id
JOIN datasets AS d ON d.id = md.dataset_id
WHERE md.entries > 0
ORDER BY m.id, d.position""",
    "repeats": """
SELECT m.name AS mixture, d.name AS dataset, b.row AS row, b.cut AS cut, count(*) AS repeats
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN datasets AS d ON d.id = b.dataset_id
GROUP BY m.id, b.id, d.id""",
    "token_composition": """
SELECT m.name AS mixture, ed.epoch AS epoch, d.name AS dataset, ed.training_entries AS entries, ed.tokens AS tokens,
       ed.supervised_tokens AS supervised_tokens,
       CAST(round(CAST(ed.tokens AS numeric) / nullif(t.tokens, 0), 6) AS double precision) AS share_of_tokens
FROM epoch_datasets AS ed
JOIN mixtures AS m ON m.id = ed.mixture_id
JOIN datasets AS d ON d.id = ed.dataset_id
JOIN (SELECT mixture_id, epoch, sum(tokens) AS tokens FROM epoch_datasets GROUP BY mixture_id, epoch) AS t
  ON t.mixture_id = ed.mixture_id AND t.epoch = ed.epoch
WHERE ed.tokens IS NOT NULL AND ed.entries > 0
ORDER BY m.id, ed.epoch, d.position""",
}
_VIEW = re.compile(r"^CREATE VIEW (\w+) AS\n(.*?);$", re.MULTILINE | re.DOTALL)


def postgres_views() -> dict[str, str]:
    """View name -> its SELECT in PostgreSQL, in the order ``schema.sql`` creates them."""
    views: list[tuple[str, str]] = _VIEW.findall(schema_script())  # two groups: (name, body)
    return {name: _OVERRIDES.get(name, body).strip() for name, body in views}


#: SQLite's round(real, digits), which PostgreSQL lacks, so queries written for a store file
#: (``round(fill, 4)``) run unchanged; it lives in the store's schema and goes with it.
ROUND_SIGNATURE = "round(double precision, integer)"
_ROUND = f"""
CREATE FUNCTION {ROUND_SIGNATURE} RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS 'SELECT CAST(pg_catalog.round(CAST($1 AS numeric), $2) AS double precision)'"""


def create_views(connection: Connection, schema: str) -> None:
    """Create every view in ``schema`` (views bind to tables, so a later rename keeps them)."""
    connection.exec_driver_sql(f'SET LOCAL search_path TO "{schema}"')
    connection.exec_driver_sql(_ROUND)
    for name, body in postgres_views().items():
        connection.exec_driver_sql(f"CREATE VIEW {name} AS\n{body}")
    connection.exec_driver_sql("SET LOCAL search_path TO DEFAULT")

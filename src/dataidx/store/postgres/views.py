"""The documented views in PostgreSQL's dialect, for stores published into a schema.

The SQLite views (``schema.sql``) are the reference; most read the same in PostgreSQL. Three
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
}
_VIEW = re.compile(r"^CREATE VIEW (\w+) AS\n(.*?);$", re.MULTILINE | re.DOTALL)


def postgres_views() -> dict[str, str]:
    """View name -> its SELECT in PostgreSQL, in the order ``schema.sql`` creates them."""
    script = schema_script()
    return {name: _OVERRIDES.get(name, body).strip() for name, body in _VIEW.findall(script)}


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

"""Reading why a spec's entries do not train, and what became of their reasoning, as
``dataidx render`` counted them (``render_causes``): a few rows, no scan of the spec's entries,
and nothing heavier than a read connection to import (``info`` and every command load it)."""

from __future__ import annotations

import os

from .connect import connect_readonly
from .dialect import ReadConnection

#: A spec's entries that do not train, per cause, the first as an example:
#: ``(cause, entries, dataset, row, cut, detail)``, most entries first.
CauseRow = tuple[str, int, str, int, "int | None", "str | None"]
CAUSES_SQL = (
    "SELECT c.cause, c.entries, d.name, b.row, b.cut, r.detail FROM render_causes AS c "
    "JOIN render_specs AS s ON s.id = c.spec_id JOIN base_entries AS b ON b.id = c.example_entry "
    "JOIN datasets AS d ON d.id = b.dataset_id "
    "JOIN entry_renders AS r ON r.spec_id = c.spec_id AND r.entry_id = c.example_entry "
    "WHERE s.name = {mark} AND c.kind = {mark} ORDER BY c.entries DESC, c.cause"
)


def render_causes(connection: ReadConnection, spec: str, kind: str = "status") -> list[CauseRow]:
    """Why entries of spec ``spec`` do not train (``kind="status"``), or what became of their
    reasoning (``kind="reasoning"``): per cause, how many entries and the first of them."""
    return [tuple(row) for row in connection.execute(connection.dialect.sql(CAUSES_SQL), (spec, kind))]


def spec_causes(store: str | os.PathLike[str], spec: str) -> list[CauseRow]:
    """:func:`render_causes` of a store's spec, in a read connection of its own."""
    connection = connect_readonly(store)
    try:
        return render_causes(connection, spec)
    finally:
        connection.close()

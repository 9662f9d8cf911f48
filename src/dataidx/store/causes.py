"""Reading why a spec's entries do not train, and what became of their reasoning, as
``dataidx render`` counted them (``render_causes``): a few rows, no scan of the spec's entries,
and nothing heavier than a read connection to import (``info`` and every command load it)."""

from __future__ import annotations

from typing import NamedTuple

from .connect import reading
from .dialect import Reads
from .handle import Store, StoreHandle


class CauseRow(NamedTuple):
    """A spec's entries that do not train for one cause (or one reasoning status), the first as
    an example."""

    cause: str
    entries: int
    dataset: str
    row: int
    cut: int | None
    detail: str | None

CAUSES_SQL = (
    "SELECT c.cause, c.entries, d.name, b.row, b.cut, r.detail FROM render_causes AS c "
    "JOIN render_specs AS s ON s.id = c.spec_id JOIN base_entries AS b ON b.id = c.example_entry "
    "JOIN datasets AS d ON d.id = b.dataset_id "
    "JOIN entry_renders AS r ON r.spec_id = c.spec_id AND r.entry_id = c.example_entry "
    "WHERE s.name = {mark} AND c.kind = {mark} ORDER BY c.entries DESC, c.cause"
)


def render_causes(reads: Reads, spec: str, kind: str = "status") -> list[CauseRow]:
    """Why entries of spec ``spec`` do not train (``kind="status"``), or what became of their
    reasoning (``kind="reasoning"``): per cause, how many entries and the first of them."""
    return [CauseRow(*row) for row in reads.all(CAUSES_SQL, spec, kind)]


def spec_causes(store: Store | StoreHandle, spec: str) -> list[CauseRow]:
    """:func:`render_causes` of a store's spec (a location, opened for this, or an open handle)."""
    with reading(store) as handle:
        return render_causes(handle, spec)

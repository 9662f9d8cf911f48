"""Reading how many of a spec's entries came to each status, why they do not train, and what
became of their reasoning, as ``dataidx render`` counted them (``render_causes``): a few rows, no
scan of the spec's entries, and nothing heavier than a read connection to import (``info`` and
every command load it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..dialect import Reads


class CauseRow(NamedTuple):
    """A spec's entries that do not train for one cause (or one reasoning status), the first as
    an example."""

    cause: str
    entries: int
    dataset: str
    row: int
    cut: int | None
    detail: str | None

#: ``(dataset, status, entries)`` of a spec, by dataset then status: its summary rows, counted
#: when it was written (counting its rows again read every one: 0.6 s at 2M entries, each write).
COUNTS = (
    "SELECT d.name, rs.status, rs.entries FROM render_statuses AS rs JOIN datasets AS d ON d.id = rs.dataset_id "
    "JOIN render_specs AS s ON s.id = rs.spec_id WHERE s.name = {mark} AND rs.entries > 0 "
    "ORDER BY d.position, rs.status"
)
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


# The datasets a mixture draws from, and those of them whose entries do not all train under a spec.
_MIXTURE_DATASETS = ("SELECT md.dataset_id FROM mixture_datasets AS md JOIN mixtures AS m ON m.id = md.mixture_id "
                     "WHERE m.name = {mark} AND md.entries > 0")
_CAUSES_OUTSIDE = ("SELECT 1 FROM render_statuses AS rs JOIN render_specs AS s ON s.id = rs.spec_id "
                   f"WHERE s.name = {{mark}} AND rs.status NOT IN ({{trains}}) AND rs.dataset_id NOT IN "
                   f"({_MIXTURE_DATASETS}) LIMIT 1")
# Counted over the entries of the mixture's datasets: a range scan of the spec's rows of each.
_MIXTURE_CAUSES = (
    "WITH spec AS (SELECT id FROM render_specs WHERE name = {mark}), "
    "found AS (SELECT r.cause AS cause, count(*) AS entries, min(r.entry_id) AS example FROM entry_renders AS r "
    "CROSS JOIN spec CROSS JOIN datasets AS d WHERE r.spec_id = spec.id AND d.id IN (" + _MIXTURE_DATASETS + ") "
    "AND r.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1 AND r.cause IS NOT NULL GROUP BY r.cause) "
    "SELECT f.cause, f.entries, d.name, b.row, b.cut, r.detail FROM found AS f CROSS JOIN spec "
    "JOIN base_entries AS b ON b.id = f.example JOIN datasets AS d ON d.id = b.dataset_id "
    "JOIN entry_renders AS r ON r.spec_id = spec.id AND r.entry_id = f.example ORDER BY f.entries DESC, f.cause"
)


def mixture_causes(reads: Reads, spec: str, mixture: str) -> list[CauseRow]:
    """:func:`render_causes` of the entries of the datasets ``mixture`` draws from (``dataidx
    compose``): read from the spec's rows of those datasets when a dataset outside it has entries
    that do not train, else the spec's stored causes, which are then the same."""
    if not reads.all(_CAUSES_OUTSIDE, spec, mixture):
        return render_causes(reads, spec)
    return [CauseRow(*row) for row in reads.all(_MIXTURE_CAUSES, spec, mixture)]


#: Per ``(kind, cause)`` (``status`` or ``reasoning``), entries and the first one's id: what a
#: render counts while it keeps its rows, and writes as ``render_causes``.
CauseTally = dict[tuple[str, str], tuple[int, int]]


def tally_causes(tally: CauseTally, rows: Iterable[Sequence[Any]]) -> None:
    """Count ``rows`` (a render's rows: entry id first, cause at 6, reasoning at 7) into ``tally``."""
    for row in rows:
        for kind, cause in (("status", row[6]), ("reasoning", row[7])):
            if cause is not None:
                n, first = tally.get((kind, cause), (0, row[0]))
                tally[kind, cause] = (n + 1, min(first, row[0]))

"""Writing a render spec: its row, one length row per base entry, the counts a summary shows,
and its lengths again as arrays (``length_chunks``: what packing and token budgets read).

``dataidx render`` computes the rows; this module is where they meet the store's tables.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, insert, update

from .causes import CauseRow, render_causes
from .deletes import delete_spec
from .dialect import Reads
from .draw_tables import LENGTH_CHUNK_ENTRIES, LengthChunk
from .mixtures.records import Mixtures
from .positions import length_chunk_rows
from .render_summaries import insert_spec_summary
from .schema import AddedTokenUse, RenderCause, RenderSpecRow
from .sqlite.working_copy import WorkingCopy

#: ``(dataset, status, entries)`` of a spec, by dataset then status.
_COUNTS = (
    "SELECT d.name, r.status, count(*) FROM entry_renders AS r JOIN base_entries AS b ON b.id = r.entry_id "
    "JOIN datasets AS d ON d.id = b.dataset_id JOIN render_specs AS s ON s.id = r.spec_id WHERE s.name = {mark} "
    "GROUP BY d.id, r.status ORDER BY d.position, r.status"
)
#: One base entry under a spec: ``(entry_id, tokens, supervised_tokens, full_tokens, status, detail,
#: cause, reasoning)``.
LengthRow = tuple[int, int, int, int, str, "str | None", "str | None", "str | None"]
#: A :data:`LengthRow` and where the entry's words lie when tokens are stored: ``token_offset``,
#: ``side_tokens``, ``token_weights`` (all None without tokens; see :mod:`.tokens`).
StoredRow = tuple[int, int, int, int, str, "str | None", "str | None", "str | None", "int | None", "int | None",
                  "bytes | None"]


def render_counts(reads: Reads, spec: str) -> list[tuple[str, str, int]]:
    """Entries per dataset and status under spec ``spec``, as the store holds them now."""
    return reads.all(_COUNTS, spec)


def save_render_spec(connection: Connection, spec: dict[str, Any], lengths: Iterable[list[StoredRow]], *, entries: int,
                     training_entries: int, started: float, added_uses: Mapping[tuple[int, str], int] | None = None,
                     causes: Mapping[tuple[str, str], tuple[int, int]] | None = None,
                     ) -> tuple[int, int, list[tuple[str, str, int]], list[CauseRow], float]:
    """Store ``spec`` (the ``render_specs`` columns but counts and times) with its ``entries``
    lengths (and where their tokens lie, if stored), chunk by chunk, in place of any spec of its
    name and the packing plans made from it; ``added_uses``: entries per ``(dataset id, token)``
    whose data text holds a plain added token;
    ``causes``: per ``(kind, cause)`` (see :class:`.RenderCause`), the entries and the first one's id.

    Returns the spec's id, the plans removed, the counts per dataset and status, the causes
    (:func:`render_causes`) and the seconds since ``started``.
    """
    plans_removed = delete_spec(connection, spec["name"]) or 0
    inserted = connection.execute(insert(RenderSpecRow).values(
        **spec, entries=entries, kept=training_entries,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=0.0,
    )).inserted_primary_key
    assert inserted is not None  # a one-row INSERT always has its key; SQLAlchemy types it Optional
    spec_id = inserted[0]
    for chunk in lengths:
        if chunk:
            connection.exec_driver_sql(
                "INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, status, detail, "
                "cause, reasoning, token_offset, side_tokens, token_weights) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(spec_id, *row) for row in chunk],
            )
    insert_spec_summary(connection, spec_id)
    insert_length_chunks(connection, spec_id)
    if added_uses:
        connection.execute(insert(AddedTokenUse), [
            {"spec_id": spec_id, "dataset_id": dataset_id, "token": token, "entries": n}
            for (dataset_id, token), n in sorted(added_uses.items())])
    if causes:
        connection.execute(insert(RenderCause), [
            {"spec_id": spec_id, "kind": kind, "cause": cause, "entries": n, "example_entry": first}
            for (kind, cause), (n, first) in sorted(causes.items())])
    written = WorkingCopy(connection)
    counts, found = render_counts(written, spec["name"]), render_causes(written, spec["name"])
    seconds = time.perf_counter() - started
    connection.execute(update(RenderSpecRow).where(RenderSpecRow.id == spec_id).values(seconds=seconds))
    return spec_id, plans_removed, counts, found, seconds


def insert_length_chunks(connection: Connection, spec_id: int) -> None:
    """Copy spec ``spec_id``'s written ``entry_renders`` lengths into its ``length_chunks``."""
    for row in length_chunk_rows(WorkingCopy(connection), spec_id, LENGTH_CHUNK_ENTRIES):
        connection.execute(insert(LengthChunk).values(**row))


def budget_mixtures_drawn_before(connection: Connection, spec: str) -> list[str]:
    """The mixtures drawn by token budgets under spec ``spec`` as it was before it was rendered
    again (or removed): readers refuse them until they are drawn again."""
    return list(Mixtures(connection).stale(spec=spec))


def move_spec_tokenizer(connection: Connection, spec: str, tokenizer: str) -> None:
    """Record where spec ``spec``'s tokenizer is now (the same tokenizer, moved)."""
    connection.execute(update(RenderSpecRow).where(RenderSpecRow.name == spec).values(tokenizer=tokenizer))

"""Writing a render spec: its row, one length row per base entry, the counts a summary shows,
and its lengths again as arrays (``length_chunks``: what packing and token budgets read).

``dataidx render`` computes the rows; :meth:`.records.Specs.save` brings them here, where they
meet the store's tables in bulk (SQLAlchemy and NumPy, which the Specs object never loads).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, insert, update

from ..sqlite.working_copy import WorkingCopy
from .causes import COUNTS, CauseRow, render_causes
from .lengths import length_chunk_rows
from .part_rows import PartRows
from .rows import StoredRow, split_plain
from .summaries import insert_spec_summary
from .tables import LENGTH_CHUNK_ENTRIES, AddedTokenUse, LengthChunk, RenderCause, RenderSpecRow


def save_render_spec(connection: Connection, spec: dict[str, Any], lengths: Iterable[list[StoredRow]] | PartRows, *,
                     entries: int, training_entries: int, started: float,
                     added_uses: Mapping[tuple[int, str], int] | None = None,
                     causes: Mapping[tuple[str, str], tuple[int, int]] | None = None,
                     ) -> tuple[int, list[tuple[str, str, int]], list[CauseRow], float]:
    """Store ``spec`` (the ``render_specs`` columns but counts and times) with its ``entries``
    lengths (and where their tokens lie, if stored), chunk by chunk or from a merge's parts, once
    any spec of its name is removed (:meth:`.records.Specs.save` removes it); ``added_uses``: entries per ``(dataset id,
    token)`` whose data text holds a plain added token; ``causes``: per ``(kind, cause)`` (see
    :class:`.RenderCause`), the entries and the first one's id.

    Returns the spec's id, the counts per dataset and status, the causes (:func:`render_causes`)
    and the seconds since ``started``.
    """
    inserted = connection.execute(insert(RenderSpecRow).values(
        **spec, entries=entries, kept=training_entries,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), seconds=0.0,
    )).inserted_primary_key
    assert inserted is not None  # a one-row INSERT always has its key; SQLAlchemy types it Optional
    spec_id = inserted[0]
    if isinstance(lengths, PartRows):  # a merge's parts: rows copied by SQLite, summaries the parts counted
        lengths.insert(connection, spec_id)
        lengths.insert_summaries(connection, spec_id)
        for row in lengths.length_chunk_rows(spec_id, lengths.parts[0].first if lengths.parts else 0):
            connection.execute(insert(LengthChunk).values(**row))
    else:
        for chunk in lengths:
            plain, full = split_plain(chunk, spec_id)
            if plain:
                connection.exec_driver_sql(
                    "INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, status, "
                    "token_offset) VALUES (?, ?, ?, ?, ?, ?, ?)", plain)
            if full:
                connection.exec_driver_sql(
                    "INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, status, "
                    "detail, cause, reasoning, token_offset, side_tokens, token_weights, extra_info) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", full)
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
    counts, found = written.all(COUNTS, spec["name"]), render_causes(written, spec["name"])
    seconds = time.perf_counter() - started
    connection.execute(update(RenderSpecRow).where(RenderSpecRow.id == spec_id).values(seconds=seconds))
    return spec_id, counts, found, seconds


def insert_length_chunks(connection: Connection, spec_id: int) -> None:
    """Copy spec ``spec_id``'s written ``entry_renders`` lengths into its ``length_chunks``."""
    for row in length_chunk_rows(WorkingCopy(connection), spec_id, LENGTH_CHUNK_ENTRIES):
        connection.execute(insert(LengthChunk).values(**row))

"""``dataidx verify`` of the summary rows (:mod:`.draw_tables`): each recounted from what it
summarises, the base entries, a mixture's positions or a spec's lengths, and compared row for
row. The cookbook answers from these rows, so a damaged or crafted one would answer wrong
without a sound; the recount reads every position, as verify's other checks do.

The SQL reads the same in SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np

from ..errors import StoreError
from .base.records import Datasets
from .compose import composition_problems
from .handle import StoreHandle
from .specs.lengths import LENGTH_COLUMNS, rendered_lengths, spec_lengths
from .summary_sql import BLOCK_SUMS, REPEAT_ROWS, STATUS_COUNTS

# How many times a mixture draws each row of a dataset over its epochs: its most drawn entry's times.
_ROW_TIMES = ('SELECT b.dataset_id AS dataset_id, b."row" AS shown_row, max(drawn.times) AS times '
              "FROM (SELECT entry_id, count(*) AS times FROM mixture_positions WHERE mixture_id = {mark} "
              "GROUP BY entry_id) AS drawn JOIN base_entries AS b ON b.id = drawn.entry_id "
              'GROUP BY b.dataset_id, b."row"')
_REPEAT_COUNTS = (
    f"SELECT dataset_id, times, count(*) FROM ({_ROW_TIMES}) AS shown GROUP BY dataset_id, times",
    "SELECT dataset_id, times, rows FROM repeat_counts WHERE mixture_id = {mark}",
)
_REPEAT_ROWS = (
    "SELECT dataset_id, times, shown_row FROM (SELECT dataset_id, times, shown_row, row_number() OVER "
    f"(PARTITION BY dataset_id, times ORDER BY shown_row) AS k FROM ({_ROW_TIMES}) AS shown) AS ranked "
    f"WHERE k <= {REPEAT_ROWS}",
    'SELECT dataset_id, times, "row" FROM repeat_rows WHERE mixture_id = {mark}',
)
# Spans cover exactly the entries used when every used entry is in one and their lengths add up
# to the entries used (overlapping or extra spans would add more). A used entry's span is the
# last that starts at or before it: a key lookup each, whatever the number of spans.
_USED = "SELECT DISTINCT entry_id FROM mixture_positions WHERE mixture_id = {mark}"
_SPANS = (
    f"SELECT (SELECT count(*) FROM ({_USED}) AS used), "
    "(SELECT coalesce(sum(entries), 0) FROM mixture_spans WHERE mixture_id = {mark}), "
    f"(SELECT count(*) FROM ({_USED}) AS used WHERE NOT EXISTS (SELECT 1 FROM mixture_spans AS s "
    "WHERE s.mixture_id = {mark} AND s.first_entry = (SELECT max(first_entry) FROM mixture_spans "
    "WHERE mixture_id = {mark} AND first_entry <= used.entry_id) AND used.entry_id < s.first_entry + s.entries))"
)
_STATUSES = (STATUS_COUNTS,
             "SELECT spec_id, dataset_id, status, entries, longest FROM render_statuses WHERE spec_id = {mark}")
_BLOCKS = (BLOCK_SUMS,
           "SELECT spec_id, block, dataset_id, entries, tokens, supervised_tokens FROM render_blocks "
           "WHERE spec_id = {mark}")


def _differences(handle: StoreHandle, pair: tuple[str, str], *key: int) -> int:
    """Rows in one of ``pair`` (recounted, stored) and not in the other; ``key`` fills each's marks.
    Each side is read once (a few rows per level, span or block) and compared here."""
    recounted, stored = (set(handle.all(sql, *key[:1] * sql.count("{mark}"))) for sql in pair)
    return len(recounted ^ stored)


def summary_problems(handle: StoreHandle) -> list[str]:
    """One line per summary table of a mixture, spec or the base index that differs from its recount."""
    problems = []
    if found := Datasets(handle).turns_differing():
        problems.append(f"dataset_turns: {found} rows differ from a recount of base_entries")
    for mixture_id, name in handle.all("SELECT id, name FROM mixtures ORDER BY id"):
        for table, pair in (("repeat_counts", _REPEAT_COUNTS), ("repeat_rows", _REPEAT_ROWS)):
            if found := _differences(handle, pair, mixture_id):
                problems.append(f"mixture '{name}': {table}: {found} rows differ from a recount of its positions")
        used, spanned, outside = handle.one(_SPANS, *[mixture_id] * _SPANS.count("{mark}")) or (0, 0, 0)
        if used != spanned or outside:
            problems.append(f"mixture '{name}': mixture_spans cover {spanned} entries ({outside} of the {used} "
                            "entries its positions use outside them)")
    for spec_id, name in handle.all("SELECT id, name FROM render_specs ORDER BY id"):
        for table, pair in (("render_statuses", _STATUSES), ("render_blocks", _BLOCKS)):
            if found := _differences(handle, pair, spec_id):
                problems.append(f"render spec '{name}': {table}: {found} rows differ from a recount of its lengths")
        if problem := _length_chunk_problem(handle, spec_id):
            problems.append(f"render spec '{name}': length_chunks: {problem}")
    return problems


def _length_chunk_problem(handle: StoreHandle, spec_id: int) -> str | None:
    """How a spec's ``length_chunks`` differ from its ``entry_renders``, or None (also for a spec
    without them, whose readers read the rows)."""
    if handle.one("SELECT 1 FROM length_chunks WHERE spec_id = {mark} LIMIT 1", spec_id) is None:
        return None
    for column in LENGTH_COLUMNS:
        try:
            chunked, rendered = spec_lengths(handle, spec_id, column), rendered_lengths(handle, spec_id, column)
        except StoreError as exc:
            return str(exc)
        # Both read the base entries end to end (or raised above): the arrays line up.
        differ = int(np.count_nonzero((chunked.tokens != rendered.tokens) | (chunked.trains != rendered.trains)))
        if differ:
            return f"{differ} entries' {column} differ from its entry_renders"
    return None


def recount_problems(handle: StoreHandle) -> list[str]:
    """Every count a store keeps beside its rows, counted again (``dataidx verify``): each
    mixture's composition (:func:`~dataidx.store.compose.composition_problems`), then the summary
    rows of draws and specs (:func:`summary_problems`)."""
    return composition_problems(handle) + summary_problems(handle)

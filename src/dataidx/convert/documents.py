"""Pretraining text documents (LLaMA-Factory's ``pt`` stage, XTuner's incremental pretraining):
one entry per row, its ``text`` trained whole.

A document sample is ``{"text": str}`` (:func:`.expansion.is_document`): the ``text`` converter
makes one from a row's ``text`` column, and a row with a ``text`` column and no messages (a
``.txt`` file's line, a ``c4_demo.jsonl`` row) is one under no converter as well. Their cut
paths here read the ``text`` column of a whole Arrow table: one entry per row, a row whose text
is null or empty training nothing (counted as an empty row, under ``allow_empty``'s rule). A
column that is not text goes to the row path, which names the row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrow_compute import pc
from .expansion import CONVERTER_COLUMNS, MESSAGE_LISTS
from .vectorised import NO_CUT, TableCuts, is_text, none_cuts


def text_cuts(table: pa.Table) -> TableCuts | None:
    """One entry per row with no cut; ``empty`` counts rows whose text is null or empty. None (the
    row path, which names the row) when ``text`` is missing or not a string column."""
    if "text" not in table.column_names:
        return None
    column = table["text"]
    if pa.types.is_null(column.type):
        empty = table.num_rows
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        empty = int(np.count_nonzero(pc.fill_null(pc.equal(column, ""), True).to_numpy(zero_copy_only=False)))
    else:
        return None
    return TableCuts(rows=np.arange(table.num_rows, dtype=np.int64), cuts=np.full(table.num_rows, NO_CUT, np.int64),
                     empty=empty)


def standard_cuts(table: pa.Table) -> TableCuts | None:
    """The ``none`` converter's cut path: a table of text documents (a ``text`` column, no message
    list) as :func:`text_cuts`, one mixing text and messages by the row path (each row decides
    what it is), else :func:`.vectorised.none_cuts`. An ``extra_info`` column that is not text
    goes to the row path too, which names the first row whose value is not."""
    if "extra_info" in table.column_names and not is_text(table["extra_info"].type):
        return None
    if "text" not in table.column_names:
        return none_cuts(table)
    if any(key in table.column_names for key in (*MESSAGE_LISTS, *CONVERTER_COLUMNS)):
        return None
    return text_cuts(table)

"""How a build reads a dataset: a chunk of whole rows at a time, and which chunks a converter's
vectorised path may read (its Arrow table names no media and is valid UTF-8). The build's
conversion and the exact-duplicate check's second read (:mod:`.exact`) decide it alike."""

from __future__ import annotations

import pyarrow as pa

from ..convert import may_hold_media

#: A chunk ends after this many rows or this many bytes of Arrow data, whichever comes first.
CHUNK_ROWS = 1 << 20
CHUNK_BYTES = 16 << 20


def vectorised(table: pa.Table) -> bool:
    """Whether a chunk's table may take a converter's vectorised path: one that may name media
    takes the row path, where each row's media is recorded."""
    return not may_hold_media(table) and _valid_utf8(table)


def _valid_utf8(table: pa.Table) -> bool:
    # datasets' json loader stores invalid UTF-8 as is; only a full validation finds it.
    try:
        table.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True

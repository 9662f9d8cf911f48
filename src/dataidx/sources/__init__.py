"""One dataset's raw rows: loading a source (plugin family ``source``), reading its rows straight
from Arrow files, and fingerprinting the files it came from."""

from .arrow_files import arrow_files_at, arrow_files_of, arrow_files_state
from .fingerprints import (
    add_places,
    added_files,
    changed_files,
    changed_while_read,
    file_stats,
    fingerprint_files,
    placed,
)
from .json_depth import MAX_NESTING, too_deep
from .loaders import BUILDERS, load, materialising_streams_into, source_files
from .registry import Loaded, register_source, sources
from .renamed import RenamedRows
from .rows import ArrowRows, BadRow, DatasetRows, RowChunk, RowSource, paused_gc

__all__ = [
    "BUILDERS",
    "ArrowRows",
    "BadRow",
    "DatasetRows",
    "Loaded",
    "MAX_NESTING",
    "RenamedRows",
    "RowChunk",
    "RowSource",
    "add_places",
    "added_files",
    "arrow_files_at",
    "arrow_files_of",
    "arrow_files_state",
    "changed_files",
    "changed_while_read",
    "file_stats",
    "fingerprint_files",
    "load",
    "materialising_streams_into",
    "paused_gc",
    "placed",
    "register_source",
    "source_files",
    "sources",
    "too_deep",
]

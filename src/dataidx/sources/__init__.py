"""One dataset's raw rows: loading a source (plugin family ``source``), reading its rows straight
from Arrow files, and fingerprinting the files it came from."""

from .arrow_files import arrow_files_at, arrow_files_of, arrow_files_state
from .dataset_rows import DatasetRows
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
from .media_files import KINDS, MediaCatalogue, MediaFile, MissingMedia, media_places
from .media_headers import MAX_FRAMES, MAX_PIXELS, MediaHeader
from .registry import Loaded, register_source, sources
from .renamed import RenamedRows
from .rows import ArrowRows, BadRow, RowChunk, RowSource, paused_gc

__all__ = [
    "BUILDERS",
    "KINDS",
    "MAX_FRAMES",
    "MAX_PIXELS",
    "MediaCatalogue",
    "MediaFile",
    "MediaHeader",
    "MissingMedia",
    "media_places",
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

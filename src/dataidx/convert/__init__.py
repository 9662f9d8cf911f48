"""Raw row -> standard sample -> entries: converters (plugin family ``converter``), their
vectorised cut paths over whole Arrow tables, expansion into cuts, and media placeholders."""

from . import formats  # registers the built-in converters
from .digests import EntryDigests, SampleDigests, concatenated_digests, sample_digests, table_digests
from .expansion import ROLES, SUPERVISED_EPSILON, cuts, is_document, sample_problem, trains_nothing, truncate
from .fingerprints import EntryPrints, SamplePrints, concatenated_prints
from .media import MEDIA_BLOCKS, MEDIA_COLUMNS, MediaMismatch, media_blocks
from .media_tables import may_hold_media
from .registry import (
    Converter,
    collecting_drops,
    convert_row,
    converters,
    drop,
    expanded_row,
    register_converter,
    row_expansion,
)
from .samples import Content, Message, PairSample, Sample, SFTSample, TextSample
from .table_fingerprints import table_prints
from .vectorised import NO_CUT, TableCuts

__all__ = [
    "MEDIA_BLOCKS",
    "MEDIA_COLUMNS",
    "NO_CUT",
    "ROLES",
    "SUPERVISED_EPSILON",
    "Content",
    "Converter",
    "EntryDigests",
    "EntryPrints",
    "MediaMismatch",
    "Message",
    "PairSample",
    "SFTSample",
    "SampleDigests",
    "SamplePrints",
    "Sample",
    "TableCuts",
    "TextSample",
    "collecting_drops",
    "concatenated_digests",
    "concatenated_prints",
    "convert_row",
    "converters",
    "cuts",
    "drop",
    "expanded_row",
    "is_document",
    "may_hold_media",
    "media_blocks",
    "register_converter",
    "row_expansion",
    "sample_digests",
    "sample_problem",
    "table_digests",
    "table_prints",
    "trains_nothing",
    "truncate",
]

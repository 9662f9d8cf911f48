"""Which Arrow tables of a build may name media files: those the build sends to the row path,
where each row's media blocks are recorded in order (:mod:`dataidx.index.media`)."""

from __future__ import annotations

import pyarrow as pa

from .arrow_compute import pc
from .expansion import MESSAGE_LISTS
from .media import MEDIA_BLOCKS
from .vectorised import _field, _has_media, is_text


def may_hold_media(table: pa.Table) -> bool:
    """Whether a table's rows may name media files, which the build records row by row: a media
    column, or a message list whose content blocks include a media type. A text-only table pays
    one hash lookup per block type (2.4 ms for 800k blocks), and only when its blocks are typed
    structs; the messages are not copied."""
    if _has_media(table):
        return True
    for name in MESSAGE_LISTS:
        if name not in table.column_names:
            continue
        type_ = table[name].type
        if not ((pa.types.is_list(type_) or pa.types.is_large_list(type_)) and pa.types.is_struct(type_.value_type)):
            continue
        message = type_.value_type
        content = message.field("content").type if message.get_field_index("content") >= 0 else pa.null()
        if not ((pa.types.is_list(content) or pa.types.is_large_list(content))
                and pa.types.is_struct(content.value_type) and content.value_type.get_field_index("type") >= 0):
            continue
        types = _field(pc.list_flatten(pc.struct_field(pc.list_flatten(table[name]), "content")), "type")
        if not is_text(types.type) or pc.any(pc.is_in(types, pa.array(MEDIA_BLOCKS))).as_py():
            return True  # blocks typed other than by text are the row path's to name
    return False

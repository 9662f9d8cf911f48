"""Parse Arrow JSON values where they sit, as ``datasets``' ``ds[i]`` does.

``datasets`` stores values of mixed shapes (messages whose keys differ from row to row) as the
``arrow.json`` extension type: text. Rows read straight from the Arrow files must parse them,
or converters would receive strings where ``ds[i]`` gives dicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

Decoder = Callable[[Any], Any]


def json_decoders(schema: pa.Schema) -> dict[str, Decoder]:
    """Per column holding Arrow JSON values (``datasets`` stores values of mixed shapes, such
    as messages whose keys differ, as ``arrow.json`` text), the function that parses them
    where they sit, as ``ds[i]`` does; columns without any are left out."""
    found = {}
    for field in schema:
        decoder = _json_decoder(field.type)
        if decoder is not None:
            found[field.name] = decoder
    return found


def _json_decoder(type_: pa.DataType) -> Decoder | None:
    if getattr(type_, "extension_name", None) == "arrow.json":
        return lambda value: None if value is None else json.loads(value)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        child = _json_decoder(type_.value_type)
        return None if child is None else (lambda value: None if value is None else [child(v) for v in value])
    if pa.types.is_struct(type_):
        children = {field.name: _json_decoder(field.type) for field in type_}
        children = {name: decoder for name, decoder in children.items() if decoder is not None}
        if not children:
            return None
        return lambda value: None if value is None else {
            key: (children[key](item) if key in children else item) for key, item in value.items()}
    return None


def decode_json(row: dict[str, Any], decoders: dict[str, Decoder]) -> dict[str, Any]:
    """``row`` with its JSON columns parsed."""
    return {key: (decoders[key](value) if key in decoders else value) for key, value in row.items()}


def decoded_json(row: dict[str, Any], decoders: dict[str, Decoder]) -> dict[str, Any] | None:
    """``row`` with its JSON columns parsed, or None when one does not parse."""
    try:
        return decode_json(row, decoders)
    except json.JSONDecodeError:
        return None  # the caller reports the row as unreadable



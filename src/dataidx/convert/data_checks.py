"""Checks the vectorised cut paths run over many values at once, answering as the converters
would: is a value JSON text, is every role standard. Where a converter would reject a row, a check
says so and the table goes to the row path, which names the row."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from . import json_text
from .arrow_compute import pc
from .expansion import ROLES


def not_json(values: list) -> np.ndarray | None:
    """A mask of the values that are not JSON text; None when one nests too deep to read (the
    converter rejects that row: ``RecursionError`` must never escape a build)."""
    bad = np.zeros(len(values), dtype=bool)
    for position, value in enumerate(values):
        try:
            json_text.loads(value)
        except (json.JSONDecodeError, TypeError):
            bad[position] = True
        except RecursionError:
            return None
    return bad


def standard_roles(roles: pa.ChunkedArray | pa.Array) -> bool:
    """Whether every role is one of :data:`.expansion.ROLES`, none null."""
    # Made here, not at import: pyarrow's first pa.array imports pandas (as in .vectorised).
    found = pc.is_in(roles, value_set=pa.array(ROLES, type=roles.type))
    return bool(pc.fill_null(found, False).to_numpy(zero_copy_only=False).all())


def tools_drops(table: pa.Table) -> int | None:
    """How many rows' ``tools`` the sharegpt and pair converters leave out as not JSON; None when
    one is not text or nests too deep (the converter fails on that row: the row path names it)."""
    if "tools" not in table.column_names or pa.types.is_null(table["tools"].type):
        return 0
    tools = table["tools"]
    if not (pa.types.is_string(tools.type) or pa.types.is_large_string(tools.type)):
        return None
    present = pc.and_(pc.is_valid(tools), pc.not_equal(pc.fill_null(tools, ""), ""))
    invalid = not_json(tools.filter(present).to_pylist())
    return None if invalid is None else int(np.count_nonzero(invalid))


def held_lists(table: pa.Table, column: str) -> np.ndarray:
    """A mask of the rows whose ``column`` holds a non-empty list (a side of a preference pair)."""
    if column not in table.column_names or not (pa.types.is_list(table[column].type)
                                                or pa.types.is_large_list(table[column].type)):
        return np.zeros(table.num_rows, dtype=bool)
    return pc.fill_null(pc.list_value_length(table[column]), 0).to_numpy(zero_copy_only=False) > 0

"""The fingerprints of a whole Arrow table's entries (:mod:`.fingerprints`), for the built-in
converters whose cut paths read whole tables: the messages each converter would make, read from
its columns without converting a row. A table a path here declines (nested types it does not
expect) is fingerprinted from its converted samples; tests/test_digests.py proves both agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .arrow_compute import pc
from .fingerprints import (
    ROLE_CODES,
    EntryPrints,
    block_code,
    block_weights,
    documents,
    entry_prints,
    messages_of,
    sequence_prints,
    text_blocks,
)
from .formats import tool_call_blocks
from .samples import Content
from .text_prints import text_column, text_prints
from .vectorised import TableCuts, _field, _flatten, _has_null_messages, _no_messages, _valid, is_text


def alpaca_prints(table: pa.Table, found: TableCuts) -> EntryPrints:
    """system, user (instruction then input, one text) and assistant messages, each there or not:
    one entry per row, all its messages, its prompt side all but the answer."""
    rows = table.num_rows
    system, user, answer = (_valid(table, "system"), _valid(table, "instruction") | _valid(table, "input"),
                            _valid(table, "output"))
    weighted = np.zeros(rows, np.uint64)
    count = np.zeros(rows, np.int64)
    for there, text, role in ((system, _texts(table, "system", system), "system"),
                              (user, _user_texts(table, user), "user")):
        if there.any():
            weighted += np.where(there, messages_of(ROLE_CODES[role], text_blocks(text))
                                 * (2 * count + 1).astype(np.uint64), np.uint64(0))
            count += there
    prompts = sequence_prints(weighted, count)
    if answer.any():
        weighted += np.where(answer, messages_of(ROLE_CODES["assistant"],
                                                 text_blocks(_texts(table, "output", answer)))
                             * (2 * count + 1).astype(np.uint64), np.uint64(0))
        count += answer
    has_prompt = answer & (count > 1)
    return EntryPrints(sequence_prints(weighted, count), np.where(has_prompt, prompts, np.uint64(0)), has_prompt)


def _texts(table: pa.Table, name: str, there: np.ndarray) -> np.ndarray:
    """The fingerprints of a text column's values (zeros where there is none)."""
    return text_prints(table[name]) if there.any() else np.zeros(table.num_rows, np.uint64)


def _user_texts(table: pa.Table, there: np.ndarray) -> np.ndarray:
    """The user's text: instruction then input."""
    given = "input" in table.column_names and is_text(table["input"].type) and not pa.types.is_null(
        table["input"].type) and pc.max(pc.binary_length(table["input"])).as_py()
    if not given:
        return _texts(table, "instruction", _valid(table, "instruction"))
    return text_prints(pc.binary_join_element_wise(pc.fill_null(text_column(table, "instruction"), ""),
                                                   pc.fill_null(table["input"], ""), ""))


_SHAREGPT = ("system", "human", "gpt", "observation", "function_call")
_SHAREGPT_ROLES = np.array([ROLE_CODES[role] for role in ("system", "user", "assistant", "tool", "assistant")],
                           np.uint64)


def sharegpt_prints(table: pa.Table, found: TableCuts) -> EntryPrints:
    """Known tags' turns; a function call's JSON as the converter writes its tool_call blocks."""
    if _no_messages(table["conversations"]):
        return entry_prints(np.zeros(0, np.uint64), np.zeros(table.num_rows + 1, np.int64), found.rows, found.cuts)
    turns, offsets = _flatten(table["conversations"])
    tags, values = _field(turns, "from"), _field(turns, "value")
    tag = pc.fill_null(pc.index_in(tags, value_set=pa.array(_SHAREGPT)), -1).to_numpy(zero_copy_only=False)
    kept = tag >= 0
    sums = text_blocks(text_prints(values))
    calls = np.flatnonzero(tag == _SHAREGPT.index("function_call"))
    if len(calls):
        blocks = [tool_call_blocks(value) if isinstance(value, str) else None
                  for value in values.take(pa.array(calls)).to_pylist()]
        kept[calls[[found_blocks is None for found_blocks in blocks]]] = False
        sums[calls] = _block_sums([found_blocks or [] for found_blocks in blocks])
    messages = messages_of(_SHAREGPT_ROLES[np.maximum(tag, 0)], sums)[kept]
    before = np.concatenate([[0], np.cumsum(kept, dtype=np.int64)])
    return entry_prints(messages, before[offsets], found.rows, found.cuts)


def _block_sums(messages: Sequence[Sequence[Content]]) -> np.ndarray:
    """The block sums of messages given as lists of blocks (a few: function calls)."""
    owner = np.repeat(np.arange(len(messages)), [len(blocks) for blocks in messages])
    place = np.concatenate([np.arange(len(blocks)) for blocks in messages] or [np.zeros(0, np.int64)])
    codes = np.array([block_code(block["type"]) for blocks in messages for block in blocks], np.uint64)
    values = pa.array([block["value"] for blocks in messages for block in blocks], pa.string())
    sums = np.zeros(len(messages), np.uint64)
    np.add.at(sums, owner, block_weights(text_prints(values), codes, place))
    return sums


def standard_prints(table: pa.Table, found: TableCuts) -> EntryPrints | None:
    """Standard messages (the ``none`` converter): every message, its blocks in order."""
    if "messages" not in table.column_names:
        return None  # preference pairs: fingerprinted from their samples
    if _no_messages(table["messages"]):
        return entry_prints(np.zeros(0, np.uint64), np.zeros(table.num_rows + 1, np.int64), found.rows, found.cuts)
    messages, offsets = _flatten(table["messages"])
    if _has_null_messages(messages, offsets):
        return None
    roles = pc.index_in(_field(messages, "role"), value_set=pa.array(list(ROLE_CODES)))
    if roles.null_count:
        return None
    role_codes = np.array(list(ROLE_CODES.values()), np.uint64)[roles.to_numpy(zero_copy_only=False)]
    sums = np.zeros(len(messages), np.uint64)
    kind = messages.type.field("content").type if messages.type.get_field_index("content") >= 0 else pa.null()
    if not pa.types.is_null(kind):
        if not (pa.types.is_list(kind) and pa.types.is_struct(kind.value_type)):
            return None
        content = pc.struct_field(messages, "content")
        blocks = pc.list_flatten(content)
        types, values = _field(blocks, "type"), _field(blocks, "value")
        if not (is_text(types.type) and is_text(values.type)) or types.null_count or values.null_count:
            return None  # a block the converted sample would show otherwise: fingerprinted from it
        lengths = pc.fill_null(pc.list_value_length(content), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        owner = np.repeat(np.arange(len(messages)), lengths)
        place = np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        names = pc.unique(types).to_pylist()
        codes = np.array([block_code(name) for name in names], np.uint64)[
            pc.index_in(types, value_set=pa.array(names, pa.string())).to_numpy(zero_copy_only=False)]
        np.add.at(sums, owner, block_weights(text_prints(values), codes, place))
    return entry_prints(messages_of(role_codes, sums), offsets, found.rows, found.cuts)


def table_prints(converter: str, table: pa.Table, found: TableCuts) -> EntryPrints | None:
    """The fingerprints of a table the converter's cut path read, or None: then its rows are
    converted again and fingerprinted from their samples."""
    if converter == "alpaca":
        return alpaca_prints(table, found)
    if converter == "sharegpt":
        return sharegpt_prints(table, found)
    documents_only = "text" in table.column_names and "messages" not in table.column_names
    if converter == "text" or (converter == "none" and documents_only):
        return documents(text_prints(text_column(table, "text")))
    return standard_prints(table, found) if converter == "none" else None

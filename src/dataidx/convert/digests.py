"""Exact-duplicate digests: a 128-bit xxh3 of each entry's messages, and of its prompt side.

An entry is serialized as the converter makes it: per message its ``role``, then per content
block its ``type``, the value's length in bytes, ``:`` and the value with its surrounding ASCII
whitespace trimmed (the only normalization: case and inner spacing are near-duplicate territory,
``dataidx dedup``'s). Lengths make the serialization one-to-one, so two entries share a digest
only if their messages are equal (or xxh3 collides, at 2^-128). Where two entries carry the same
text in alpaca and in sharegpt rows they get one digest: it is the messages that are hashed, not
the row. An entry's messages are its row's first ``cut``; its prompt side those before the last
(the supervised turn), so both are prefixes of one serialization of the row and each entry
hashes two slices of it. A preference pair serializes both sides, and its prompt is the chosen
side without its answer; a document is ``text``, its length and its text.

Vectorised in Arrow for alpaca, sharegpt and standard (``none``) tables and documents; any other
converter, and a table a vectorised path declines, is serialized from the converted sample
(:func:`sample_digests`). tests/test_digests.py proves both give the same digests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from .arrow_compute import pc
from .expansion import is_document
from .text_prints import text_column
from .vectorised import NO_CUT, TableCuts, _field, _flatten, _has_null_messages, _no_messages, is_text

_WHITESPACE = " \t\n\v\f\r"  # pyarrow's ascii_trim_whitespace set
DIGEST = np.dtype("V16")


@dataclass(frozen=True)
class EntryDigests:
    """Per entry of a chunk, in entry order: its messages' digest, its prompt side's, and whether it
    has a prompt side (a document, an entry without a supervised turn or one opening with its
    answer has none; its prompt digest is then zeros)."""

    messages: np.ndarray
    prompts: np.ndarray
    has_prompt: np.ndarray


def _prefix_digests(data: memoryview, starts: np.ndarray, ends: np.ndarray, prompt_ends: np.ndarray) -> EntryDigests:
    """Digests of ``data[start:end]`` and, where ``prompt_end > start``, of ``data[start:prompt_end]``."""
    digest = xxhash.xxh3_128_digest
    starts_, ends_ = starts.tolist(), ends.tolist()
    messages = np.frombuffer(b"".join([digest(data[a:b]) for a, b in zip(starts_, ends_)]), DIGEST)
    has_prompt = prompt_ends > starts
    prompts = np.zeros(len(starts), DIGEST)
    at = np.flatnonzero(has_prompt)
    if len(at):
        prompts[at] = np.frombuffer(b"".join([digest(data[a:b]) for a, b in zip(starts[at].tolist(),
                                                                                   prompt_ends[at].tolist())]), DIGEST)
    return EntryDigests(messages, prompts, has_prompt)


def _trimmed_block(kind: str | pa.ChunkedArray, text: pa.ChunkedArray) -> pa.ChunkedArray:
    """``kind``, the trimmed text's length in bytes, ``:`` and the trimmed text; null where text is."""
    trimmed = pc.ascii_trim_whitespace(text)
    return pc.binary_join_element_wise(kind, pc.cast(pc.binary_length(trimmed), pa.string()), ":", trimmed, "")


def _buffer(values: pa.ChunkedArray | pa.Array) -> tuple[memoryview, np.ndarray]:
    """One contiguous byte buffer of ``values`` and their offsets into it (len + 1)."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    array = array.cast(pa.large_binary())
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset: array.offset + len(array) + 1]
    data = array.buffers()[2]
    return memoryview(data if data is not None else b""), offsets


def _from_messages(serialized: pa.ChunkedArray, row_first: np.ndarray, found: TableCuts) -> EntryDigests:
    """Entries' digests from the kept messages' serializations in row order (``row_first``: each
    row's first message, len rows + 1)."""
    data, bounds = _buffer(serialized)
    rows, cuts = found.rows, found.cuts
    first = row_first[rows]
    starts = bounds[first]
    whole = cuts == NO_CUT
    ends = np.where(whole, bounds[row_first[rows + 1]], bounds[first + np.maximum(cuts, 0)])
    prompt_ends = np.where(whole, starts, bounds[first + np.maximum(cuts - 1, 0)])
    return _prefix_digests(data, starts, ends, prompt_ends)


def alpaca_digests(table: pa.Table, found: TableCuts) -> EntryDigests | None:
    """An alpaca table's entries: system, user (instruction then input) and assistant messages."""
    column = {name: text_column(table, name) for name in ("system", "instruction", "input", "output")}
    user_text = pc.if_else(pc.or_(pc.is_valid(column["instruction"]), pc.is_valid(column["input"])),
                           pc.binary_join_element_wise(pc.fill_null(column["instruction"], ""),
                                                       pc.fill_null(column["input"], ""), ""),
                           pa.scalar(None, pa.string()))
    parts = [_trimmed_block("systemtext", column["system"]), _trimmed_block("usertext", user_text),
             _trimmed_block("assistanttext", column["output"])]
    lengths = [pc.fill_null(pc.binary_length(part), 0).to_numpy(zero_copy_only=False).astype(np.int64)
               for part in parts]
    # null_handling="skip" returns nothing at all when every value is null (pyarrow 26): fill instead
    data, row_bounds = _buffer(pc.binary_join_element_wise(*[pc.fill_null(part, "") for part in parts], ""))
    starts = row_bounds[:-1][found.rows]
    ends = row_bounds[1:][found.rows]
    prompt_ends = np.where(found.cuts == NO_CUT, starts, ends - lengths[2][found.rows])
    return _prefix_digests(data, starts, ends, prompt_ends)


def text_digests(table: pa.Table, found: TableCuts) -> EntryDigests | None:
    """A table of documents: ``text``, its length and its text; no prompt side."""
    data, bounds = _buffer(_trimmed_block("text", pc.fill_null(text_column(table, "text"), "")))
    starts = bounds[:-1][found.rows]
    return _prefix_digests(data, starts, bounds[1:][found.rows], starts)


_SHAREGPT_ROLES = {"system": "system", "human": "user", "gpt": "assistant", "observation": "tool"}


def sharegpt_digests(table: pa.Table, found: TableCuts) -> EntryDigests | None:
    """A sharegpt table's entries; a table with function calls is left to the converted samples."""
    if _no_messages(table["conversations"]):
        return _without_messages(table, found)
    messages, offsets = _flatten(table["conversations"])
    tags, values = _field(messages, "from"), _field(messages, "value")
    if pc.any(pc.equal(tags, "function_call")).as_py():
        return None
    known = pa.array(list(_SHAREGPT_ROLES))
    kept = pc.fill_null(pc.is_in(tags, value_set=known), False)
    roles = pc.take(pa.array([role + "text" for role in _SHAREGPT_ROLES.values()]),
                    pc.index_in(pc.filter(tags, kept), value_set=known))
    serialized = _trimmed_block(roles, pc.filter(values, kept))
    return _from_messages(serialized, _row_first(kept, offsets), found)


def standard_digests(table: pa.Table, found: TableCuts) -> EntryDigests | None:
    """Standard messages (the ``none`` converter): every message kept, its blocks in order."""
    if "messages" not in table.column_names:
        return None  # documents are text_digests'; pairs are hashed from their samples
    if _no_messages(table["messages"]):
        return _without_messages(table, found)
    messages, offsets = _flatten(table["messages"])
    if _has_null_messages(messages, offsets) or pa.types.is_null(messages.type):
        return None
    roles = _field(messages, "role")
    if messages.type.get_field_index("content") < 0 or pa.types.is_null(messages.type.field("content").type):
        return _from_messages(roles, offsets, found)  # messages without content: their roles
    content = pc.struct_field(messages, "content")
    if not pa.types.is_list(content.type) or not pa.types.is_struct(content.type.value_type):
        return None
    blocks = pc.list_flatten(content)
    kinds, values = pc.struct_field(blocks, "type"), pc.struct_field(blocks, "value")
    if not (is_text(kinds.type) and is_text(values.type)) or kinds.null_count or values.null_count:
        return None  # a block the converted sample would show otherwise: hashed from it
    block_offsets = np.concatenate([[0], np.cumsum(pc.fill_null(pc.list_value_length(content), 0)
                                                   .to_numpy(zero_copy_only=False))]).astype(np.int64)
    per_message = pa.ListArray.from_arrays(pa.array(block_offsets, pa.int32() if block_offsets[-1] < 2**31 else
                                                    pa.int64()), _trimmed_block(kinds, values).combine_chunks())
    joined = pc.binary_join_element_wise(roles, pc.fill_null(pc.binary_join(per_message, ""), ""), "")
    return _from_messages(joined, offsets, found)


def _without_messages(table: pa.Table, found: TableCuts) -> EntryDigests:
    """Rows that hold no messages: each entry's serialization is empty."""
    return _from_messages(pa.chunked_array([], pa.string()), np.zeros(table.num_rows + 1, np.int64), found)


def _row_first(kept: pa.ChunkedArray | pa.Array, offsets: np.ndarray) -> np.ndarray:
    """Each row's first kept message among the kept ones (len rows + 1)."""
    mask = kept.to_numpy(zero_copy_only=False) if isinstance(kept, pa.Array) else np.concatenate(
        [chunk.to_numpy(zero_copy_only=False) for chunk in kept.chunks] or [np.zeros(0, bool)])
    before = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    return before[offsets]


#: The vectorised digests of the built-in converters whose cut paths read whole tables.
TABLE_DIGESTS = {"alpaca": alpaca_digests, "sharegpt": sharegpt_digests, "text": text_digests}


def table_digests(converter: str, table: pa.Table, found: TableCuts) -> EntryDigests | None:
    """The entries' digests of a table the converter's cut path read, or None: then the rows'
    converted samples are hashed (:func:`sample_digests`)."""
    if converter == "none":
        documents = "text" in table.column_names and "messages" not in table.column_names
        return text_digests(table, found) if documents else standard_digests(table, found)
    function = TABLE_DIGESTS.get(converter)
    return None if function is None else function(table, found)


def _block_bytes(block: Any) -> bytes:
    value = block.get("value") if isinstance(block, dict) else None
    text = (value if isinstance(value, str) else str(value)).strip(_WHITESPACE).encode("utf-8", "surrogatepass")
    kind = str(block.get("type")) if isinstance(block, dict) else str(block)
    return b"%s%d:%s" % (kind.encode("utf-8", "surrogatepass"), len(text), text)


def _message_bytes(message: Any) -> bytes:
    content = message.get("content") or [] if isinstance(message, dict) else []
    role = str(message.get("role")) if isinstance(message, dict) else ""
    return role.encode("utf-8", "surrogatepass") + b"".join(_block_bytes(block) for block in content)


def _document_bytes(text: Any) -> bytes:
    return _block_bytes({"type": "text", "value": text or ""})


class SampleDigests:
    """Digests of converted samples' entries, a row at a time (the build's row path)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.prompts: list[bytes] = []
        self.has_prompt: list[bool] = []

    def add(self, sample: Mapping[str, Any], cuts: Sequence[int | None]) -> None:
        """One sample's entries, ``cuts`` as :func:`.expansion.cuts` gives them (None: whole)."""
        entries, prompt_sides = _serialized(sample, cuts)
        digest = xxhash.xxh3_128_digest
        for entry, prompt in zip(entries, prompt_sides, strict=True):
            self.messages.append(digest(entry))
            self.prompts.append(_NO_PROMPT if prompt is None else digest(prompt))
            self.has_prompt.append(prompt is not None)

    def result(self) -> EntryDigests:
        return EntryDigests(np.frombuffer(b"".join(self.messages), DIGEST),
                            np.frombuffer(b"".join(self.prompts), DIGEST), np.array(self.has_prompt, dtype=bool))


_NO_PROMPT = bytes(16)


def _serialized(sample: Mapping[str, Any], cuts: Sequence[int | None]) -> tuple[list[bytes], list[bytes | None]]:
    """Each entry's serialization and its prompt side's (None: it has none)."""
    if is_document(sample):
        return [_document_bytes(sample["text"])] * len(cuts), [None] * len(cuts)
    if sample.get("messages") is None and sample.get("chosen_messages") is not None:
        chosen = [_message_bytes(message) for message in sample.get("chosen_messages") or []]
        rejected = [_message_bytes(message) for message in sample.get("rejected_messages") or []]
        pair = b"chosen%d:%s" % (len(chosen), b"".join(chosen)) + b"rejected%d:%s" % (len(rejected), b"".join(rejected))
        return [pair] * len(cuts), [b"".join(chosen[:-1]) if len(chosen) > 1 else None] * len(cuts)
    each = [_message_bytes(message) for message in sample.get("messages") or []]
    return ([b"".join(each if cut is None else each[:cut]) for cut in cuts],
            [None if cut is None or cut <= 1 else b"".join(each[:cut - 1]) for cut in cuts])


def sample_digests(samples: Iterable[tuple[Mapping[str, Any], Sequence[int | None]]]) -> EntryDigests:
    """Digests of converted samples' entries: per sample, its cuts (None for a whole entry)."""
    digests = SampleDigests()
    for sample, cuts in samples:
        digests.add(sample, cuts)
    return digests.result()


def concatenated_digests(parts: list[EntryDigests]) -> EntryDigests:
    """Chunks' digests in entry order."""
    if not parts:
        return EntryDigests(np.zeros(0, DIGEST), np.zeros(0, DIGEST), np.zeros(0, bool))
    return EntryDigests(np.concatenate([part.messages for part in parts]),
                        np.concatenate([part.prompts for part in parts]),
                        np.concatenate([part.has_prompt for part in parts]))

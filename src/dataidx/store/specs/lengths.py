"""A mixture's positions as one array of base entry ids, and a spec's lengths as arrays by entry.

Packing, the rendered engine and token budgets need, for every position, the entry behind it and
that entry's token count and status. Runs expand by arithmetic and only explicit positions are read, so a
1.9M-position mixture costs one small query plus one per spec, not a row object per position.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ...errors import StoreError
from ..handle import StoreHandle
from .rows import SpecLengths

if TYPE_CHECKING:
    from ..sqlite.working_copy import WorkingCopy

#: What reads a spec's lengths: a store handle, or a writer's working copy (which writes them).
LengthReads: TypeAlias = "StoreHandle | WorkingCopy"

#: Rows fetched at a time when reading scattered positions.
_ROWS_PER_FETCH = 1 << 16
#: Bits of a row's offset in its chunk, the low bits of each integer a chunk's read returns.
_OFFSET_BITS = 20
#: Rows whose values (an entry's lengths, or a row) one query reads (:func:`key_chunks`), as one text of integers.
_ENTRIES_PER_LENGTHS_QUERY = 1 << _OFFSET_BITS


def _id_range(handle: LengthReads, table: str, column: str, where: str = "", *parameters: object
              ) -> tuple[int, int] | None:
    """The least and greatest ``column`` of ``table`` (rows ``where`` holds), or None for none:
    two subqueries, each answered from the key's first or last entry. One query asking for both
    (or for a count beside them) reads every row: 2-4 s at 20M entries."""
    where = f" WHERE {where}" if where else ""
    first, last = handle.one(f"SELECT (SELECT min({column}) FROM {table}{where}), "
                             f"(SELECT max({column}) FROM {table}{where})", *parameters, *parameters) or (None, None)
    return None if first is None or last is None else (first, last)


def base_entry_range(handle: LengthReads) -> tuple[int, int] | None:
    """``(first, last)`` base entry id, or None for a store without entries: what a spec's lengths
    cover. Elsewhere ``Datasets(handle).entry_range()``; not here, as the base index reads its row
    starts through :func:`key_chunks` and the two modules would import each other."""
    return _id_range(handle, "base_entries", "id")


#: What :func:`spec_lengths` can read as an entry's length: ``(length, trains)`` as one integer
#: where the length is one a render writes (not negative, past 2**31 - 1, or text in a crafted
#: SQLite file, which would otherwise spill into other bits or be read as a number it is not).
_PACKED_LENGTHS = {
    column: (f"(CAST({column} AS bigint) << 1) | CAST(status IN ({{trains}}) AS integer)",
             f"{column} BETWEEN 0 AND 2147483647")
    for column in ("tokens", "supervised_tokens")
}
LENGTH_COLUMNS = tuple(_PACKED_LENGTHS)


def _integers(handle: LengthReads, template: str, *parameters: object) -> np.ndarray:
    """The integers of a read whose one value is a :attr:`Dialect.int_list` text. NumPy parses
    the text: a Python int per value (a row, or a JSON array's item) costs more than the SQL."""
    text = handle.value(template, *parameters)
    if not text:
        return np.zeros(0, dtype=np.int64)
    try:
        values = np.fromstring(text, dtype=np.int64, sep=",")
    except ValueError:
        values = None
    # A text NumPy cannot read to its end gives a short array (an older NumPy warns and stops):
    # counted, not caught as a warning, whose filters are the whole process's, not this thread's.
    if values is None or len(values) != text.count(",") + 1:
        raise StoreError("the store holds a value that is not an integer where one is; the store is damaged")
    return values


def _in_entry_order(values: np.ndarray, count: int, *, refused: str, gaps: str, absent: int | None = None
                    ) -> np.ndarray:
    """The values of a chunk of ``count`` entries read as ``value << 20 | offset``, each put at its
    offset: in entry order whatever order the read gave. A negative integer (what the read writes
    for a value no build or render writes) raises ``refused``; an entry missing or twice, ``gaps``
    (or, given ``absent``, a missing one reads as ``absent``: keys are unique, so none is twice)."""
    if len(values) and values.min() < 0:
        raise StoreError(refused)
    offsets = values & ((1 << _OFFSET_BITS) - 1)
    if (len(values) != count and absent is None) or len(values) > count or (len(values) and offsets.max() >= count):
        raise StoreError(gaps)
    seen = np.zeros(count, dtype=bool)
    seen[offsets] = True
    if not seen.all() and absent is None:
        raise StoreError(gaps)
    ordered = np.empty(count, dtype=np.int64) if absent is None else np.full(count, absent, dtype=np.int64)
    ordered[offsets] = values >> _OFFSET_BITS
    return ordered


def key_chunks(reads: LengthReads, table: str, key: str, value: str, valid: str, first: int, last: int,
               where: str = "", *parameters: object, refused: str, gaps: str, absent: int | None = None
               ) -> Iterator[tuple[int, np.ndarray]]:
    """``(first key, values)`` of the rows of ``table`` (``where`` holds) keyed ``first..last``, a
    million keys at a time, each chunk in key order: ``value`` is an integer expression below
    2**43 where ``valid`` holds (else StoreError ``refused``). Every key must be there once (else
    StoreError ``gaps``), or a key no row has reads as ``absent``.

    Each chunk is one text of ``value << 20 | key offset`` (a text of integers beat a JSON
    array, which beat fetching rows), parsed by NumPy: no Python int per row. The offset in the
    low bits keeps the numbers short (10 digits for a few hundred tokens, where the offset in the
    high bits wrote 17: SQLite's text of a million, 0.45 -> 0.3 s) and says where each value goes."""
    packed = (f"CASE WHEN {valid} THEN (({value}) << {_OFFSET_BITS}) | ({key} - {{mark}}) ELSE -1 END")
    chunk = (f"SELECT {reads.dialect.int_list.format(packed)} FROM {table} WHERE "
             + (f"{where} AND " if where else "") + f"{key} BETWEEN {{mark}} AND {{mark}}")
    for start in range(first, last + 1, _ENTRIES_PER_LENGTHS_QUERY):
        stop = min(start + _ENTRIES_PER_LENGTHS_QUERY - 1, last)
        yield start, _in_entry_order(_integers(reads, chunk, start, *parameters, start, stop), stop - start + 1,
                                     refused=refused, gaps=gaps, absent=absent)


def spec_lengths(handle: LengthReads, spec_id: int, column: str = "tokens") -> SpecLengths:
    """Every base entry's tokens (or ``supervised_tokens``) and trains flag under a spec (the spec
    covers every entry): from its ``length_chunks``, a few rows of arrays, or where it has none
    (a spec whose rows no render would write is migrated without them), from ``entry_renders``."""
    if column not in LENGTH_COLUMNS:
        raise ValueError(f"column must be one of {LENGTH_COLUMNS}, got {column!r}")
    chunks = handle.all(f"SELECT first_entry, entries, length({column}) FROM length_chunks WHERE spec_id = {{mark}} "
                        "ORDER BY first_entry", spec_id)
    return (_lengths_from_chunks(handle, spec_id, chunks, column) if chunks
            else rendered_lengths(handle, spec_id, column))


def _lengths_from_chunks(handle: LengthReads, spec_id: int, chunks: list[tuple[object, ...]], column: str
                         ) -> SpecLengths:
    """A spec's lengths from its ``length_chunks``, whose rows ``(first_entry, entries, bytes)``
    must cover the base entries end to end, 4 bytes an entry: else the store is damaged (checked
    before anything is allocated by what a row claims, and each array again as it is read, one
    at a time)."""
    found = base_entry_range(handle)
    damaged = (f"a render spec's length_chunks do not hold {column} for every base entry, 4 bytes each; the store "
               "is damaged")
    if found is None:
        raise StoreError(damaged)
    first, last = found
    expected = first
    for start, entries, size in chunks:
        if (type(start) is not int or type(entries) is not int or start != expected or entries <= 0
                or size != 4 * entries):
            raise StoreError(damaged)
        expected += entries
    if expected != last + 1:
        raise StoreError(damaged)
    tokens, trains = np.empty(last - first + 1, dtype=np.int32), np.empty(last - first + 1, dtype=bool)
    read = f"SELECT {column} FROM length_chunks WHERE spec_id = {{mark}} AND first_entry = {{mark}}"
    for start, entries, _ in chunks:
        assert isinstance(start, int) and isinstance(entries, int)
        values = handle.value(read, spec_id, start)
        if not isinstance(values, (bytes, memoryview)) or len(values) != 4 * entries:  # text of that length
            raise StoreError(damaged)
        packed = np.frombuffer(values, dtype="<u4")
        at = slice(start - first, start - first + entries)
        tokens[at] = packed >> 1  # at most 2**31 - 1: it fits
        trains[at] = (packed & 1).astype(bool)
    return SpecLengths(first, tokens, trains)


def rendered_lengths(handle: LengthReads, spec_id: int, column: str = "tokens", *, partial: bool = False
                     ) -> SpecLengths:
    """:func:`spec_lengths` from ``entry_renders``, a row per entry: what ``length_chunks`` are
    written from, and what ``verify`` compares them with. ``partial``: for every base entry, one
    without a row (a damaged store, whose plans verify recounts) at -1 tokens, not training.

    Read a million entries at a time (:func:`key_chunks`), each as ``tokens << 1 | trains``: the
    text for a chunk only, 5 bytes an entry in the arrays kept.
    """
    if column not in LENGTH_COLUMNS:
        raise ValueError(f"column must be one of {LENGTH_COLUMNS}, got {column!r}")
    found = base_entry_range(handle) if partial else _id_range(handle, "entry_renders", "entry_id",
                                                                "spec_id = {mark}", spec_id)
    if found is None:
        return SpecLengths(1, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool))
    if not partial and found != base_entry_range(handle):  # else an entry before the first would read the last one's
        raise StoreError("a render spec does not cover every base entry; the store is damaged")
    first, last = found
    tokens, trains = np.zeros(last - first + 1, dtype=np.int32), np.zeros(last - first + 1, dtype=bool)
    for start, values in key_chunks(
            handle, "entry_renders", "entry_id", *_PACKED_LENGTHS[column], first, last, "spec_id = {mark}", spec_id,
            refused=f"a render spec holds {column} that no render writes (negative, past 2**31 - 1 or not a number); "
                    "the store is damaged",
            gaps="a render spec does not cover every base entry; the store is damaged",
            absent=-2 if partial else None):  # -2: -1 tokens (>> 1), not training (& 1)
        tokens[start - first : start - first + len(values)] = values >> 1
        trains[start - first : start - first + len(values)] = (values & 1).astype(bool)
    return SpecLengths(first, tokens, trains)


def pack_lengths(tokens: np.ndarray, trains: np.ndarray) -> bytes:
    """Lengths as ``length_chunks`` holds them: ``length << 1 | trains``, 4 bytes each."""
    return ((tokens.astype("<u4") << 1) | trains).astype("<u4").tobytes()


def length_chunk_rows(reads: WorkingCopy, spec_id: int, entries_per_chunk: int) -> Iterator[dict[str, object]]:
    """``length_chunks`` rows of spec ``spec_id`` from its ``entry_renders`` (a writer's copy):
    none where the spec does not cover every base entry, which its readers then refuse as before."""
    try:
        lengths = [rendered_lengths(reads, spec_id, column) for column in LENGTH_COLUMNS]
    except StoreError:
        return
    first, count = lengths[0].first, len(lengths[0].tokens)
    for start in range(0, count, entries_per_chunk):
        at = slice(start, min(start + entries_per_chunk, count))
        arrays = {column: pack_lengths(found.tokens[at], found.trains[at])
                  for column, found in zip(LENGTH_COLUMNS, lengths)}
        yield {"spec_id": spec_id, "first_entry": first + start, "entries": at.stop - at.start, **arrays}

"""The cells of a mapped Arrow file as Python values, with a few integers kept per record batch.

A fetch reads one row of a record batch. ``column[i].as_py()`` builds a pyarrow scalar first,
about 1.1 us of a string cell's 1.7, so flat columns (text and fixed-width numbers, a null told
by the validity bitmap) are read from their buffers instead: offsets and numbers as memoryview
words, text decoded from the mapped bytes, nothing copied. The views are made once per file,
over the whole map, and what a batch keeps is where its buffers lie in it: three integers a
column, in one array for the file. A DataLoader worker in random order soon reads every batch
and keeps what it made for each: views and a reader per column came to 4 KB a batch (4.3 MiB of
each worker's private memory over a million alpaca rows), these integers to 72 bytes. Nested
cells keep ``as_py`` (pyarrow converts a list of structs faster than Python walks its buffers),
and so do other types and any buffer outside the map (a compressed file's): the batch keeps
that column's array. The values are the same either way (tests compare them on generated
tables).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import pyarrow as pa

#: The word of a text column's offsets, by type.
_OFFSETS = {pa.string(): "i", pa.large_string(): "q"}
#: Fixed-width numbers read as ``memoryview`` words, which index to Python ints and floats (30 ns,
#: where a NumPy scalar and ``.item()`` take 150).
_NUMBERS = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q", pa.uint8(): "B",
            pa.uint16(): "H", pa.uint32(): "I", pa.uint64(): "Q", pa.float32(): "f", pa.float64(): "d"}
#: Integers kept per column of a batch: its first word in the column's view of the map, the
#: byte its text starts at, the byte its validity bitmap starts at (-1: no nulls).
_FIELDS = 3
#: The first word of a column this batch reads with ``as_py``, from the array it keeps.
_AS_PY = -1
#: The words of a column always read by ``as_py`` (nested, boolean, dictionary...): none.
_NO_WORDS = memoryview(b"")


class _Column(NamedTuple):
    name: str
    number: int
    slot: int  # its first integer in a batch's part of the array
    words: memoryview  # the whole map as its offsets' or numbers' words, or _NO_WORDS
    text: bool


class MappedCells:
    """The cells of one mapped Arrow file's record batches, a batch located once.

    Example::

        cells = MappedCells(buffer, schema, batches=len(layout))
        if not cells.located(2):
            cells.locate(2, record_batch_2)   # read from ``buffer`` zero-copy
        cells.row(2, 17)                      # {"instruction": ..., "output": ...}
    """

    def __init__(self, buffer: pa.Buffer, schema: pa.Schema, batches: int) -> None:
        self._start, self._end = buffer.address, buffer.address + buffer.size
        self._bytes = memoryview(buffer)
        views: dict[str, memoryview] = {}
        self._columns = []
        for number, field in enumerate(schema):
            code = _OFFSETS.get(field.type) or _NUMBERS.get(field.type)
            if code is not None and code not in views:
                size = struct.calcsize(code)
                # typeshed lists each format as a literal; ours come from a table
                views[code] = self._bytes[: len(self._bytes) // size * size].cast(code)  # type: ignore[call-overload]
            words = views[code] if code is not None else _NO_WORDS
            self._columns.append(_Column(field.name, number, number * _FIELDS, words, field.type in _OFFSETS))
        self._width = len(self._columns) * _FIELDS
        # 8 bytes an integer, 72 a batch of three columns: 0.7 MB for a file of ten million rows.
        self._where = memoryview(bytearray(batches * self._width * 8)).cast("q")
        self._located = bytearray(batches)
        self._plain = bytearray(batches)  # 1: no column of the batch has nulls or is read by as_py
        # Only batches with a column read by as_py: its array at its number, None at the others'.
        self._arrays: dict[int, list[Any]] = {}

    def located(self, batch: int) -> bool:
        return bool(self._located[batch])

    @property
    def kept(self) -> int:
        """How many located batches keep arrays (a column read by ``as_py``): all the Python
        objects this holds for the batches it has read."""
        return len(self._arrays)

    def locate(self, batch: int, record_batch: pa.RecordBatch) -> None:
        """Record where ``record_batch``, batch ``batch`` of the file, keeps each column."""
        if not record_batch.num_rows:  # no row to read
            self._located[batch] = 1
            return
        at = batch * self._width
        kept: list[pa.Array | None] = []
        for column, array in zip(self._columns, record_batch.columns):
            found = self._place(array, column) if column.words is not _NO_WORDS else None
            if found is None:
                self._where[at + column.slot] = _AS_PY
                kept.append(array)
            else:
                for offset, value in enumerate(found):
                    self._where[at + column.slot + offset] = value
                kept.append(None)
        if any(array is not None for array in kept):
            self._arrays[batch] = kept
        else:
            self._plain[batch] = all(self._where[at + column.slot + 2] < 0 for column in self._columns)
        self._located[batch] = 1  # last: another thread reads the batch only once all of it is here

    def row(self, batch: int, index: int) -> dict[str, Any]:
        """Row ``index`` of located batch ``batch``, as ``record_batch.to_pylist()[index]``."""
        where, data, at = self._where, self._bytes, batch * self._width
        row: dict[str, Any] = {}
        if self._plain[batch]:  # the common batch: every column read from words, no nulls
            for name, _, slot, words, text in self._columns:
                first = where[at + slot] + index
                if text:  # Arrow checked the encoding when it wrote it; bytes damaged since raise as as_py does
                    start = where[at + slot + 1]
                    row[name] = str(data[start + words[first]: start + words[first + 1]], "utf-8")
                else:
                    row[name] = words[first]
            return row
        for name, number, slot, words, text in self._columns:
            first = where[at + slot]
            if first == _AS_PY:
                row[name] = self._arrays[batch][number][index].as_py()
                continue
            valid = where[at + slot + 2]
            # A null's slot holds whatever the writer left there: the validity bit decides before it is read.
            if valid >= 0 and not data[valid + (index >> 3)] >> (index & 7) & 1:
                row[name] = None
            elif text:
                cell, start = first + index, where[at + slot + 1]
                row[name] = str(data[start + words[cell]: start + words[cell + 1]], "utf-8")
            else:
                row[name] = words[first + index]
        return row

    def forget(self) -> None:
        """Drop what batches keep; each is located again when next read."""
        self._arrays.clear()
        self._located[:] = self._plain[:] = bytes(len(self._located))

    def _place(self, array: pa.Array, column: _Column) -> tuple[int, int, int] | None:
        """The integers ``array``'s cells are read by, or None when its buffers are not all words
        of the map (a slice, a compressed file's buffers, an odd alignment)."""
        if array.offset:
            return None
        validity, values, *text = array.buffers()
        size = column.words.itemsize
        first = self._inside(values, size)
        start = 0 if not column.text or text[0] is None or not text[0].size else self._inside(text[0], 1)
        valid = self._inside(validity, 1) if array.null_count else -1
        if first is None or start is None or valid is None:
            return None
        return first // size, start, valid

    def _inside(self, buffer: pa.Buffer | None, size: int) -> int | None:
        """The byte of the map ``buffer`` starts at, if all of it lies in the map on a word of ``size``."""
        if buffer is None:
            return None
        address = buffer.address
        if not self._start <= address <= address + buffer.size <= self._end or (address - self._start) % size:
            return None
        return address - self._start

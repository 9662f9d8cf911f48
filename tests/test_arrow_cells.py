"""Cells read from a mapped file's buffers are the values pyarrow's ``as_py`` gives, for every
type, null and slice, wherever the batch's buffers lie."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.sources.arrow_cells import MappedCells

from .helpers import examples

NUMBERS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
           pa.float32(), pa.float64()]


def stream(*arrays: pa.Array) -> tuple[pa.Buffer, list[pa.RecordBatch]]:
    """An IPC stream of one batch per array (column ``c``, then ``d``, a text column beside it),
    and its batches read back zero-copy: a store's mapped file and what it reads from it."""
    sink = pa.BufferOutputStream()
    schema = pa.schema([("c", arrays[0].type), ("d", pa.string())])
    with pa.ipc.new_stream(sink, schema) as writer:
        for array in arrays:
            beside = pa.array([f"d{i}" for i in range(len(array))], type=pa.string())
            writer.write_batch(pa.record_batch([array, beside], schema=schema))
    buffer = sink.getvalue()
    return buffer, list(pa.ipc.open_stream(buffer))


def assert_same_cells(*arrays: pa.Array, read_by_as_py: bool = False) -> None:
    buffer, batches = stream(*arrays)
    cells = MappedCells(buffer, batches[0].schema, len(batches))
    for number, batch in enumerate(batches):
        assert not cells.located(number)
        cells.locate(number, batch)
        got = [cells.row(number, index) for index in range(batch.num_rows)]
        want = batch.to_pylist()
        assert got == want and [type(row["c"]) for row in got] == [type(row["c"]) for row in want]
    # Flat columns are read from the map, keeping nothing but integers; the rest keep their arrays.
    assert cells.kept == (sum(1 for batch in batches if batch.num_rows) if read_by_as_py else 0)
    cells.forget()  # located again when next read, the same values
    assert not cells.located(0)
    cells.locate(0, batches[0])
    assert [cells.row(0, index) for index in range(batches[0].num_rows)] == batches[0].to_pylist()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.lists(st.one_of(st.text(), st.none()), max_size=30), min_size=1, max_size=3), st.booleans())
def test_text_cells_equal_as_py_in_every_batch(batches: list[list[str | None]], large: bool) -> None:
    kind = pa.large_string() if large else pa.string()
    assert_same_cells(*(pa.array(values, type=kind) for values in batches))


@pytest.mark.parametrize("kind", NUMBERS, ids=str)
def test_number_cells_equal_as_py_at_their_extremes(kind: pa.DataType) -> None:
    if pa.types.is_floating(kind):
        values = [0.0, -0.0, 1.5, -3.25e38 if kind == pa.float32() else -1.7e308, float("inf"), 1e-7]
    else:
        info = (pa.types.is_signed_integer(kind), kind.bit_width)
        low, high = (-(2 ** (info[1] - 1)), 2 ** (info[1] - 1) - 1) if info[0] else (0, 2 ** info[1] - 1)
        values = [low, high, 0, 1, low + 1]
    with_nulls = pa.array([None, *values, None, values[0]] * 3, type=kind)  # nulls on both sides of a byte
    assert_same_cells(pa.array(values, type=kind), with_nulls, with_nulls.slice(5, 11))


@pytest.mark.parametrize(("array", "read_by_as_py"), [
    (pa.array(["a", None, "c"]), False),                                   # nulls: the validity bitmap
    (pa.array([[{"from": "human", "value": "hi"}], []]), True),             # nested: as_py
    (pa.array([True, False]), True),                                       # bits: as_py
    (pa.array([], type=pa.string()), False),                               # empty
    (pa.array(["x", "y"], type=pa.string()).dictionary_encode(), True),    # dictionary: as_py
    (pa.array([1.5, None], type=pa.float64()), False),
    (pa.array(["", ""]), False),                                           # text of no bytes
], ids=["nulls", "nested", "bool", "empty", "dictionary", "float-nulls", "empty-text"])
def test_other_cells(array: pa.Array, read_by_as_py: bool) -> None:
    assert_same_cells(array, read_by_as_py=read_by_as_py)


def test_a_batch_whose_buffers_lie_outside_the_map_is_read_by_as_py() -> None:
    """A slice (offset not 0) or a batch held elsewhere (a compressed file's buffers are
    decompressed into memory of their own) keeps its arrays: the same values."""
    values = pa.array(["a", None, "ccc", "dd"] * 5)
    buffer, batches = stream(values)
    cells = MappedCells(buffer, batches[0].schema, 3)
    elsewhere = pa.record_batch([values, pa.array([str(i) for i in range(20)])], schema=batches[0].schema)
    for number, batch in enumerate([batches[0].slice(3, 9), elsewhere, batches[0]]):
        cells.locate(number, batch)
        assert [cells.row(number, index) for index in range(batch.num_rows)] == batch.to_pylist()

"""Cells read from Arrow buffers are the values pyarrow's ``as_py`` gives, for every type and slice."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.sources.arrow_cells import cell_reader

from .helpers import examples

NUMBERS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
           pa.float32(), pa.float64()]


def through_ipc(array: pa.Array) -> pa.Array:
    """The array as a store reads it: written to an IPC stream and read back zero-copy."""
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([array], names=["c"])
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch().column(0)


def assert_same_cells(array: pa.Array) -> None:
    for candidate in (array, through_ipc(array)):
        cell = cell_reader(candidate)
        got = [cell(index) for index in range(len(candidate))]
        want = [candidate[index].as_py() for index in range(len(candidate))]
        assert got == want and [type(v) for v in got] == [type(v) for v in want]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of(st.text(), st.none()), max_size=30), st.integers(0, 10), st.integers(0, 30), st.booleans())
def test_text_cells_equal_as_py_in_every_slice(values: list[str | None], start: int, length: int,
                                               large: bool) -> None:
    array = pa.array(values, type=pa.large_string() if large else pa.string())
    assert_same_cells(array.slice(min(start, len(values)), length))


@pytest.mark.parametrize("kind", NUMBERS, ids=str)
def test_number_cells_equal_as_py_at_their_extremes(kind: pa.DataType) -> None:
    if pa.types.is_floating(kind):
        values = [0.0, -0.0, 1.5, -3.25e38 if kind == pa.float32() else -1.7e308, float("inf"), 1e-7]
    else:
        info = (pa.types.is_signed_integer(kind), kind.bit_width)
        low, high = (-(2 ** (info[1] - 1)), 2 ** (info[1] - 1) - 1) if info[0] else (0, 2 ** info[1] - 1)
        values = [low, high, 0, 1, low + 1]
    array = pa.array(values, type=kind)
    assert_same_cells(array)
    assert_same_cells(array.slice(2, 2))
    with_nulls = pa.array([None, *values, None, values[0]] * 3, type=kind)  # nulls on both sides of a byte
    assert_same_cells(with_nulls)
    assert_same_cells(with_nulls.slice(5, 11))


@pytest.mark.parametrize("array", [
    pa.array(["a", None, "c"]),                                        # nulls: the validity bitmap
    pa.array([[{"from": "human", "value": "hi"}], []]),                 # nested: as_py
    pa.array([True, False]),                                           # bits: as_py
    pa.array([], type=pa.string()),                                    # empty
    pa.array(["x", "y"], type=pa.string()).dictionary_encode(),        # dictionary: as_py
    pa.array([1.5, None], type=pa.float64()),
], ids=["nulls", "nested", "bool", "empty", "dictionary", "float-nulls"])
def test_other_cells_keep_as_py(array: pa.Array) -> None:
    assert_same_cells(array)

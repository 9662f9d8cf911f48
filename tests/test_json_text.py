"""The converters' JSON reader and writer answer exactly as ``json.loads`` and ``json.dumps``.

v1 re-serialises every function call and a row's tools; dataidx makes the C scanner and encoder
once instead of per call (convert/json_text.py). Any difference would change a sample's text, and
so its tokens, from v1's: the values, the texts and the exceptions must all be the same.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.convert import json_text

from .helpers import examples

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                     st.floats(allow_nan=True, allow_infinity=True), st.text())
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                       max_leaves=20)


def _outcome(read: Any, text: Any) -> tuple[str, ...]:
    """What reading ``text`` gives: the value written back by json.dumps (NaN compares by its text), or the error."""
    try:
        value = read(text)
    except RecursionError:
        return ("RecursionError",)
    except Exception as exc:  # the exception is part of the answer: the converters act on it
        return (type(exc).__name__, str(exc))
    return ("value", json.dumps(value))


def test_the_fast_path_is_the_one_tested() -> None:
    # CPython has both accelerators; without them the module is json's own functions.
    assert json_text._SCAN is not None and json_text._ENCODE is not None


@given(_VALUES)
@settings(max_examples=examples(500), deadline=None)
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert json_text.dumps(value) == json.dumps(value)


@given(_VALUES, st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 2}, {"ensure_ascii": False}]),
       st.sampled_from(["", " ", "\n\t ", "\r\n"]))
@settings(max_examples=examples(500), deadline=None)
def test_loads_reads_what_json_loads_reads(value: Any, style: dict[str, Any], space: str) -> None:
    text = space + json.dumps(value, **style) + space
    assert _outcome(json_text.loads, text) == _outcome(json.loads, text)


@given(st.one_of(st.text(), st.text(alphabet='{}[]":,. 0123456789eE+-tfnruIaNy\\\ufeff\t\n', max_size=30)))
@settings(max_examples=examples(1000), deadline=None)
def test_any_text_gets_json_loads_answer(text: str) -> None:
    assert _outcome(json_text.loads, text) == _outcome(json.loads, text)


def test_edges_get_json_loads_answer() -> None:
    for text in ("\ufeff[1]", "[1] x", "", "NaN", "01", "1.", "[1,]", "1" * 5000, "[" * 100_000 + "]" * 100_000,
                 b"[1]", None, 5, '{"a": 1, "a": 2}', '"\\ud800"'):
        assert _outcome(json_text.loads, text) == _outcome(json.loads, text), repr(text)[:40]
    nan = json_text.loads("NaN")
    assert math.isnan(nan)
    for value in ({1: 2, 2.5: 3, False: 4, None: 5}, {"a": float("nan"), "b": [1e-05, -0.0, 1e16]}, "é😀\u2028"):
        assert json_text.dumps(value) == json.dumps(value)

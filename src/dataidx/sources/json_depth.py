"""How deep a JSON file nests, found before pyarrow's JSON reader sees it.

pyarrow's reader recurses once per level and crashes the whole process (a segmentation fault,
no exception) somewhere past 5,000 levels. No dataset needs more than a few dozen, so a file
nesting past :data:`MAX_NESTING` is refused, naming the file and line.

The count is exact and runs at memory speed: NumPy finds the quotes that are not escaped
(a quote after an odd run of backslashes is text), and so which brackets stand outside
strings, a block of the file at a time; brackets inside text never count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The deepest nesting a JSON source may have.
MAX_NESTING = 500
_BLOCK = 8 << 20
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


@dataclass
class _State:
    """Where a scan stands at the end of a block: depth, inside a string or not, whether the
    block ended on an odd run of backslashes (escaping the next block's first byte), line."""

    depth: int = 0
    in_string: bool = False
    escaping: bool = False
    line: int = 1


def too_deep(path: str, limit: int = MAX_NESTING, *, block_size: int = _BLOCK) -> int | None:
    """The first line (1-based) of ``path`` where JSON nests deeper than ``limit``, or None
    (read ``block_size`` bytes at a time: the answer is the same for any size)."""
    state = _State()
    with open(path, "rb") as handle:
        while block := handle.read(block_size):
            found = _scan(block, state, limit)
            if found is not None:
                return found
    return None


def _scan(block: bytes, state: _State, limit: int) -> int | None:
    prefix = (b'"' if state.in_string else b"") + (b"\\" if state.escaping else b"")
    data = np.frombuffer(prefix + block, dtype=np.uint8)
    skip = len(prefix)
    index = np.arange(len(data))
    backslash = data == _BACKSLASH
    # Backslashes just before each byte: an odd run escapes it.
    last_other = np.maximum.accumulate(np.where(backslash, -1, index))
    run_before = np.concatenate([[0], index[:-1] - last_other[:-1]])
    escaped = (run_before & 1).astype(bool)
    quotes = (data == _QUOTE) & ~escaped
    inside = (np.cumsum(quotes) & 1).astype(bool)  # a string's opening quote counts as inside
    outside = ~inside & ~quotes
    step = np.zeros(len(data), dtype=np.int64)
    step[outside & ((data == ord("[")) | (data == ord("{")))] = 1
    step[outside & ((data == ord("]")) | (data == ord("}")))] = -1
    depth = state.depth + np.cumsum(step)
    over = np.flatnonzero(depth > limit)
    if len(over):
        return state.line + int(np.count_nonzero(data[skip : max(skip, int(over[0]))] == ord("\n")))
    state.depth = int(depth[-1]) if len(depth) else state.depth
    state.in_string = bool(inside[-1]) if len(inside) else state.in_string
    state.escaping = bool(len(data) and (index[-1] - last_other[-1]) & 1)
    state.line += block.count(b"\n")
    return None

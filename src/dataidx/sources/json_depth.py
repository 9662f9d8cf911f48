"""How deep a JSON file nests, found before pyarrow's JSON reader sees it.

pyarrow's reader recurses once per level and crashes the whole process (a segmentation fault,
no exception) somewhere past 5,000 levels. No dataset needs more than a few dozen, so a file
nesting past :data:`MAX_NESTING` is refused, naming the file and line.

The count is exact and runs at memory speed. Only six bytes matter (``"`` ``\\`` ``[`` ``]``
``{`` ``}``), and they are rare in text: a few vectorised passes over a block (in a core's cache)
mark them, NumPy lists their positions, and all the rest works on those positions only: which
quotes are not escaped (a quote after an odd run of backslashes is text), so which brackets stand
outside strings; brackets inside text never count. Lines are counted only for the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The deepest nesting a JSON source may have.
MAX_NESTING = 500
_BLOCK = 256 << 10  # fits a core's cache: each pass over a block reads it from there
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


@dataclass
class _State:
    """Where a scan stands at the end of a block: depth, inside a string or not, whether the
    block ended on an odd run of backslashes (escaping the next block's first byte)."""

    depth: int = 0
    in_string: bool = False
    escaping: bool = False


def too_deep(path: str, limit: int = MAX_NESTING, *, block_size: int = _BLOCK) -> int | None:
    """The first line (1-based) of ``path`` where JSON nests deeper than ``limit``, or None
    (read ``block_size`` bytes at a time: the answer is the same for any size)."""
    state, buffers = _State(), _Buffers(block_size)
    offset, room = 0, memoryview(bytearray(block_size))
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(room):
            block = room[:size]
            found = _scan(block, state, limit, buffers.marked(block))
            if found is not None:
                return line_at(path, offset + found)
            offset += size
    return None


class _Buffers:
    """Room for one block's passes, allocated once per file."""

    def __init__(self, size: int) -> None:
        self.folded, self.shifted = np.empty(size, np.uint8), np.empty(size, np.uint8)
        self.mask, self.quote = np.empty(size, np.bool_), np.empty(size, np.bool_)

    def marked(self, block: memoryview) -> np.ndarray:
        """True at every byte of ``block`` that may matter: the six, and ``|`` and 0x02, which
        share their pattern of bits and are told apart by value afterwards."""
        n = len(block)
        folded, shifted, mask, quote = self.folded[:n], self.shifted[:n], self.mask[:n], self.quote[:n]
        np.bitwise_or(np.frombuffer(block, np.uint8), 0x20, out=folded)  # [ \ ] -> { | }, 0x02 -> "
        np.subtract(folded, 123, out=shifted)  # { | } -> 0 1 2, every other byte past 2 (uint8 wraps)
        np.less_equal(shifted, 2, out=mask)
        np.equal(folded, _QUOTE, out=quote)
        return np.bitwise_or(mask, quote, out=mask)


def _scan(block: memoryview, state: _State, limit: int, marked: np.ndarray) -> int | None:
    """The offset in ``block`` of the first bracket nesting past ``limit``, or None (and
    ``state`` carried to the block's end); ``marked`` is True where a byte may matter."""
    if state.depth > limit:  # only for a limit below 0: the first byte is already too deep
        return 0
    positions = np.flatnonzero(marked)
    values = np.frombuffer(block, dtype=np.uint8)[positions]
    quotes = values == _QUOTE
    backslashes = values == _BACKSLASH
    if state.escaping or backslashes.any():  # rare: text with escapes
        at = positions[backslashes]
        if state.escaping:  # the last block ended on an odd run: one more backslash just before
            at = np.concatenate([np.array([-1], dtype=at.dtype), at])
        escaping = odd_run_ends(at)  # the byte after each is escaped
        quotes &= ~np.isin(positions - 1, escaping)
        state.escaping = bool(len(escaping)) and int(escaping[-1]) == len(block) - 1
    inside = np.logical_xor.accumulate(quotes)  # a string's opening quote counts as inside
    if state.in_string:
        inside = ~inside
    if len(inside):
        state.in_string = bool(inside[-1])
    # ``| 0x20`` maps [ and { to 123, ] and } to 125, and no other marked byte to either.
    shape = values | 0x20
    opens, closes = (shape == 123) & ~inside, (shape == 125) & ~inside
    if state.depth + np.count_nonzero(opens) <= limit:  # nothing here can nest past it
        state.depth += int(np.count_nonzero(opens)) - int(np.count_nonzero(closes))
        return None
    brackets = np.flatnonzero(opens | closes)
    depth = state.depth + np.cumsum(np.where(opens[brackets], 1, -1))
    over = np.flatnonzero(depth > limit)
    if len(over):
        return int(positions[brackets[over[0]]])
    state.depth = int(depth[-1])
    return None


def odd_run_ends(backslashes: np.ndarray) -> np.ndarray:
    """Where the runs of consecutive backslashes at ``backslashes`` (sorted offsets) end, for
    the runs of odd length: the byte after each is escaped."""
    if not len(backslashes):
        return backslashes
    ends = np.flatnonzero(np.diff(backslashes, append=backslashes[-1] + 2) != 1)
    lengths = np.diff(ends, prepend=-1)
    return backslashes[ends[lengths & 1 == 1]]


def line_at(path: str, offset: int) -> int:
    """The 1-based line of the byte at ``offset`` in ``path``."""
    lines = 1
    with open(path, "rb") as handle:
        while offset > 0 and (block := handle.read(min(_BLOCK, offset))):
            lines += block.count(b"\n")
            offset -= len(block)
    return lines

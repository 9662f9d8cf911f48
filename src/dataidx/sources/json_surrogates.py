"""Where a JSON file escapes half a UTF-16 surrogate pair without its other half.

``"\\ud800"`` is valid JSON but no character. pyarrow's reader refuses it (a build stopped with
"Trailing data at position 43 <- JSON parse error: The surrogate pair in string is invalid"),
but where it cannot read a file (a ``[...]`` array, as LLaMA-Factory's demo files are, or values
of mixed shapes) ``datasets`` reads it with ujson, which drops a lone high half without a word:
the text changed in silence, in one row's content blocks while another file's plain content was
refused. Found here first, in the file itself, so every such file is refused alike, by line.

Like the nesting count (:mod:`.json_depth`), the scan works on the positions of backslashes
only: an escape is a backslash ending an odd run, and its six bytes are read where it stands,
a few bytes past a block's end when it straddles one.
"""

from __future__ import annotations

import os

import numpy as np

from .json_depth import line_at, odd_run_ends

_BLOCK = 256 << 10
_AHEAD = 12  # the bytes of a pair's low half that a high half at a block's last byte needs
_BACKSLASH, _U, _D = ord("\\"), ord("u"), ord("d")
_HEX = np.zeros(256, dtype=bool)
_HEX[list(b"0123456789abcdefABCDEF")] = True
_HIGH = np.zeros(256, dtype=bool)  # the third hex digit of \uD800-\uDBFF, lowered
_HIGH[list(b"89ab")] = True
_LOW = np.zeros(256, dtype=bool)  # of \uDC00-\uDFFF
_LOW[list(b"cdef")] = True


def lone_surrogate(path: str, *, block_size: int = _BLOCK) -> tuple[int, str] | None:
    """The first line (1-based) of ``path`` holding a ``\\u`` escape of a lone surrogate, and
    the escape, or None (read ``block_size`` bytes at a time: the answer is the same for any size)."""
    room = memoryview(bytearray(block_size + _AHEAD))
    escaping, expected, offset = False, -1, 0
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(room[:block_size]):
            ahead = handle.readinto(room[size:size + _AHEAD]) or 0
            if ahead:
                handle.seek(-ahead, os.SEEK_CUR)  # read again as the next block's own
            data = np.frombuffer(room, dtype=np.uint8, count=size + ahead)
            found, escaping, expected = _scan(data, size, offset, escaping, expected)
            if found is not None:
                return line_at(path, offset + found), bytes(data[found:found + 6]).decode("ascii")
            offset += size
    return None


def _scan(data: np.ndarray, size: int, offset: int, escaping: bool, expected: int) -> tuple[int | None, bool, int]:
    """The offset of the first lone surrogate escape among ``data[:size]``, the block at
    ``offset`` of the file (``data`` runs on into the next block); whether the block ends on an
    odd run of backslashes; and where in the file the low half of a pair that a high half in this
    block opened starts, if past the block (-1: none). ``expected`` is that of the blocks before."""
    backslashes = np.flatnonzero(data[:size] == _BACKSLASH)
    if escaping:  # the last block ended on an odd run: one more backslash just before this one
        backslashes = np.concatenate([np.array([-1], dtype=backslashes.dtype), backslashes])
    escapes = odd_run_ends(backslashes)  # the byte after each is escaped
    escaping = bool(len(escapes)) and int(escapes[-1]) == size - 1
    # The escapes of this block, with room for their six bytes (a file cut inside one is not JSON).
    escapes = escapes[(escapes >= 0) & (escapes + 5 < len(data))]
    escapes = escapes[data[escapes + 1] == _U]
    if not len(escapes):
        return None, escaping, expected if expected >= offset + size else -1
    half = ((data[escapes + 2] | 0x20) == _D) & _HEX[data[escapes + 4]] & _HEX[data[escapes + 5]]
    third = data[escapes + 3] | 0x20
    highs, lows = escapes[half & _HIGH[third]], escapes[half & _LOW[third]]
    after = highs[highs + 11 < len(data)]  # where a low half could follow
    follows = after[(data[after + 6] == _BACKSLASH) & (data[after + 7] == _U) & ((data[after + 8] | 0x20) == _D)
                    & _LOW[data[after + 9] | 0x20] & _HEX[data[after + 10]] & _HEX[data[after + 11]]]
    lone = np.concatenate([highs[~np.isin(highs, follows)],
                           lows[~np.isin(lows, follows + 6) & (lows + offset != expected)]])
    found = int(lone.min()) if len(lone) else None
    if len(follows) and int(follows[-1]) + 6 >= size:
        expected = offset + int(follows[-1]) + 6
    return found, escaping, expected if expected >= offset + size else -1

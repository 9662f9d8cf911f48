"""Text fingerprints: a 64-bit number per text that equal texts always share, computed in NumPy
over an Arrow column's bytes, for :mod:`.fingerprints` to mix into messages and entries.

A text is trimmed of its surrounding ASCII whitespace (the digests' only normalization) and read
as its length and three 8-byte words: its first, its middle and its last. Unequal texts of one
length with those words equal share a fingerprint; the digests tell them apart.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrow_compute import pc

_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
#: Odd 64-bit constants (golden ratio, xxhash's and murmur's primes): one per part mixed in.
KEYS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                 0x27D4EB2F165667C5, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9, 0x85EBCA77C2B2AE63,
                 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53], dtype=np.uint64)
_WORD_START, _WORD_MIDDLE, _WORD_END, _LENGTH = range(4)
_K = KEYS


def mix(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer, element-wise (uint64 arithmetic wraps)."""
    values = values ^ (values >> np.uint64(33))
    values *= _K[8]
    values ^= values >> np.uint64(33)
    values *= _K[9]
    return values ^ (values >> np.uint64(33))


#: Texts longer than this on average are read chunk by chunk where they lie; shorter ones are
#: copied into one array first (one pass of NumPy calls instead of one per chunk of a thousand).
LONG_TEXT = 256


def text_column(table: pa.Table, name: str) -> pa.ChunkedArray:
    """A text column of ``table``; nulls where it is missing or holds nothing but nulls."""
    if name not in table.column_names or pa.types.is_null(table[name].type):
        return pa.chunked_array([pa.nulls(table.num_rows, pa.string())])
    return table[name]


def text_prints(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per text (null as empty): its fingerprint once surrounding ASCII whitespace is trimmed."""
    if values.null_count:
        values = pc.fill_null(values, "")
    if isinstance(values, pa.ChunkedArray) and values.num_chunks > 1 and values.nbytes > LONG_TEXT * len(values):
        found = [prints_between(*_column(chunk)) for chunk in values.chunks if len(chunk)]
        return np.concatenate(found) if found else np.zeros(0, np.uint64)
    return prints_between(*_column(values))


def _column(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A text column's bytes (8 at least) and where each text starts and stops in them."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offsets = np.frombuffer(array.buffers()[1], np.int64 if large else np.int32)[array.offset:
                                                                                 array.offset + len(array) + 1] \
        if len(array) else np.zeros(1, np.int32)
    buffer = array.buffers()[2] if len(array) else None
    data = np.frombuffer(buffer, np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    if len(data) < 8:
        data = np.concatenate([data, np.zeros(8, np.uint8)])
    return data, offsets[:-1], offsets[1:]


def prints_between(data: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The fingerprints of the texts ``data[start:stop]``, each trimmed first.

    A text is read as three 8-byte words, at its start, its middle and its end, in one gather
    (the three lie in a cache line or two). A text of 8 bytes or more that neither starts nor
    ends with whitespace is done then (its first and last bytes are in those words); the rest
    are trimmed and read again, as a rule few.
    """
    last = len(data) - 8
    words = np.ndarray((last + 1,), dtype="<u8", buffer=data, strides=(1,))  # the 8 bytes at every byte
    length = stop - start
    places = _places(start, stop, last)
    read = words[places.ravel()].reshape(-1, 3)
    edged = _spaces((read[:, 0] & np.uint64(0xFF)).astype(np.uint8))
    edged |= _spaces((read[:, 2] >> np.uint64(56)).astype(np.uint8))
    edged |= length < 8
    again = np.flatnonzero(edged)
    if len(again):
        trimmed_start, trimmed_stop = _trimmed(data, start[again], stop[again])
        length[again] = trimmed_length = trimmed_stop - trimmed_start
        places[again] = _places(trimmed_start, trimmed_stop, last)
        read[again] = words[places[again].ravel()].reshape(-1, 3)
        short = np.flatnonzero(trimmed_length < 8)
        if len(short):  # one word, read where it lies and cut to the text
            at = again[short]
            shift = ((trimmed_start[short] - places[at, 0]) * 8).astype(np.uint64)
            read[at] = ((read[at, 0] >> shift) & _MASKS[trimmed_length[short]])[:, None]
    return _mixed(read, length)


def _mixed(read: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A text's fingerprint from its three words (rows of ``read``) and its trimmed length."""
    mixed = read[:, 0] * _K[_WORD_START]
    mixed ^= read[:, 1] * _K[_WORD_MIDDLE]
    mixed ^= read[:, 2] * _K[_WORD_END]
    mixed ^= length.astype(np.uint64) * _K[_LENGTH]
    mixed ^= mixed >> np.uint64(29)
    mixed *= _K[9]
    return mixed


def _places(start: np.ndarray, stop: np.ndarray, last: int) -> np.ndarray:
    """Where a text's first, middle and last words start: at its start, halfway (counted from its
    start, so a text reads the same wherever it lies), and 8 bytes before its stop; a text under
    8 bytes reads one word from its start (clamped to the buffer, then shifted)."""
    places = np.empty((len(start), 3), dtype=np.int64)
    np.minimum(start, last, out=places[:, 0])
    np.subtract(stop, 8, out=places[:, 2])
    np.maximum(places[:, 2], places[:, 0], out=places[:, 2])
    np.subtract(places[:, 2], places[:, 0], out=places[:, 1])
    places[:, 1] >>= 1
    places[:, 1] += places[:, 0]
    return places


_STEPS = 16  # whitespace bytes trimmed a step at a time; a longer run is found by a search
_WHITESPACE_BYTES = b" \t\n\v\f\r"


def _spaces(values: np.ndarray) -> np.ndarray:
    """Which bytes are ASCII whitespace (9-13 and 32: pyarrow's ascii_trim_whitespace set, and
    str.strip's in ASCII); arithmetic, as a lookup table indexed by bytes casts them first."""
    return (values == 32) | ((values - np.uint8(9)) < np.uint8(5))


def _trimmed(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each text's bounds without its surrounding ASCII whitespace (a text at the very end of the
    bytes reads its own last byte; an empty one's byte is never looked at)."""
    _trim_side(data, start, end, front=True)
    _trim_side(data, start, end, front=False)
    return start, end


def _trim_side(data: np.ndarray, start: np.ndarray, end: np.ndarray, *, front: bool) -> None:
    """Move ``start`` past leading (``front``) or ``end`` before trailing whitespace, in place: a
    step at a time for the texts still on a space, then one search each for the few runs longer."""
    edge, step = (start, 1) if front else (end, -1)
    look = 0 if front else -1  # the byte a side reads: the first, or the one before the end

    def spaced(at: np.ndarray) -> np.ndarray:
        return _spaces(data[np.minimum(edge[at] + look, len(data) - 1)]) & (start[at] < end[at])

    live = np.flatnonzero(spaced(np.arange(len(edge))))
    for _ in range(_STEPS):
        if not len(live):
            return
        edge[live] += step
        live = live[spaced(live)]
    for at in live.tolist():  # a long run of whitespace: found in one search of its bytes
        text = data[start[at]:end[at]].tobytes()
        kept = text.lstrip(_WHITESPACE_BYTES) if front else text.rstrip(_WHITESPACE_BYTES)
        edge[at] += step * (len(text) - len(kept))

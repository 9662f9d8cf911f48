"""An MP4/MOV file's header read from its ``moov`` box with ``struct``, without decoding a frame.

ISO/IEC 14496-12 lays a file out as boxes (``size``, ``type``, payload); the top level is walked by
seeking past each box, so a file of any size costs a few reads, and only ``moov`` is read, when
it is at most :data:`MAX_MOOV_BYTES`. The movie's duration comes from ``mvhd``, the picture size
from the video track's ``tkhd``, its frame count from ``stsz`` (the sample table) and its rate
from that count over the track's ``mdhd`` duration.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

#: A ``moov`` box larger than this is refused: a real one holds ~12 bytes a frame, so 64 MiB is
#: several million frames, past any bound on frames.
MAX_MOOV_BYTES = 64 << 20
#: Top-level boxes walked before giving up on finding ``moov``.
MAX_TOP_BOXES = 4096
#: The first box types of an MP4 or MOV file, besides ``ftyp``.
LEADING_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")


class BadBoxes(ValueError):
    """The file is not laid out as MP4 boxes, or lacks what its header must hold."""


def _boxes(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """``(type, payload start, payload end)`` of each box in ``data[start:end]``."""
    end = len(data) if end is None else end
    while start + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, start)
        header = 8
        if size == 1:
            if start + 16 > end:
                raise BadBoxes("a box header is cut short")
            size, header = struct.unpack_from(">Q", data, start + 8)[0], 16
        elif size == 0:
            size = end - start
        if size < header or start + size > end:
            raise BadBoxes(f"box '{kind.decode('latin-1')}' claims {size} bytes, past its parent")
        yield kind, start + header, start + size
        start += size


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    return next(((s, e) for k, s, e in _boxes(data, start, end) if k == kind), None)


def _path(data: bytes, start: int, end: int, *kinds: bytes) -> tuple[int, int] | None:
    found: tuple[int, int] | None = (start, end)
    for kind in kinds:
        if found is None:
            return None
        found = _child(data, found[0], found[1], kind)
    return found


def find_moov(handle: BinaryIO, size: int) -> bytes:
    """The payload of the file's top-level ``moov`` box, read with bounded seeks and reads."""
    offset = 0
    for _ in range(MAX_TOP_BOXES):
        handle.seek(offset)
        header = handle.read(16)
        if len(header) < 8:
            break
        box, kind = struct.unpack_from(">I4s", header)
        skip = 8
        if box == 1:
            if len(header) < 16:
                raise BadBoxes("a box header is cut short")
            box, skip = struct.unpack_from(">Q", header, 8)[0], 16
        elif box == 0:
            box = size - offset
        if box < skip:
            raise BadBoxes(f"box '{kind.decode('latin-1')}' claims {box} bytes")
        if kind == b"moov":
            if box - skip > MAX_MOOV_BYTES:
                raise BadBoxes(f"its moov box claims {box - skip} bytes, over the {MAX_MOOV_BYTES} read")
            handle.seek(offset + skip)
            payload = handle.read(box - skip)
            if len(payload) != box - skip:
                raise BadBoxes("its moov box is cut short (a truncated file)")
            return payload
        offset += box
    raise BadBoxes("no moov box (a truncated or fragmented file)")


def mp4_header(handle: BinaryIO, size: int) -> dict[str, float | int | None]:
    """``width``, ``height``, ``frames``, ``fps`` and ``duration`` (seconds) of the first video track;
    BadBoxes when the boxes say otherwise or hold no video track."""
    moov = find_moov(handle, size)
    mvhd = _child(moov, 0, len(moov), b"mvhd")
    if mvhd is None:
        raise BadBoxes("its moov box has no mvhd")
    version = moov[mvhd[0]]
    scale, length = (struct.unpack_from(">IQ", moov, mvhd[0] + 20) if version == 1
                     else struct.unpack_from(">II", moov, mvhd[0] + 12))
    duration = length / scale if scale else None
    for kind, start, end in _boxes(moov):
        if kind != b"trak":
            continue
        hdlr = _path(moov, start, end, b"mdia", b"hdlr")
        if hdlr is None or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        return {"duration": duration, **_video_track(moov, start, end)}
    raise BadBoxes("it has no video track")


def _video_track(moov: bytes, start: int, end: int) -> dict[str, float | int | None]:
    tkhd, mdhd = _child(moov, start, end, b"tkhd"), _path(moov, start, end, b"mdia", b"mdhd")
    stsz = _path(moov, start, end, b"mdia", b"minf", b"stbl", b"stsz")
    if tkhd is None or mdhd is None or stsz is None:
        raise BadBoxes("its video track lacks tkhd, mdhd or stsz")
    at = tkhd[0] + (88 if moov[tkhd[0]] == 1 else 76)  # width and height, 16.16 fixed point, end the box
    width, height = (value >> 16 for value in struct.unpack_from(">II", moov, at))
    scale, length = (struct.unpack_from(">IQ", moov, mdhd[0] + 20) if moov[mdhd[0]] == 1
                     else struct.unpack_from(">II", moov, mdhd[0] + 12))
    frames = struct.unpack_from(">I", moov, stsz[0] + 8)[0]
    seconds = length / scale if scale else 0
    return {"width": width, "height": height, "frames": frames,
            "fps": round(frames / seconds, 3) if seconds else None}

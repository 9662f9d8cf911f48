"""What a media file's header says, read without decoding it: an image's size (Pillow reads its
header lazily), a WAV's samples, rate and channels (``wave``), an MP4/MOV's size, frames, rate
and duration (:mod:`.mp4_boxes`). A header over a bound is refused, so a crafted file costs a
few reads, never a decode; a file whose header reads but whose data is cut short (a truncated
JPEG) is found only when a render decodes it.
"""

from __future__ import annotations

import struct
import warnings
import wave
from dataclasses import dataclass
from typing import BinaryIO

from .mp4_boxes import LEADING_BOXES, BadBoxes, mp4_header

#: Pixels of an image or a video frame above which a header is refused: Pillow's own bound
#: against decompression bombs (``Image.MAX_IMAGE_PIXELS``, 89,478,485, about 9459 x 9459).
MAX_PIXELS = 89_478_485
#: Frames of an animated image or a video above which a header is refused: 2**19, 4.8 hours at
#: 30 frames a second; an animated GIF's frames are counted up to it by walking its blocks.
MAX_FRAMES = 1 << 19
#: What each kind is read as; any other format of that kind is refused as unsupported.
FORMATS = {"image": "the formats Pillow opens", "video": "MP4/MOV", "audio": "WAV (PCM)"}


class MediaUnreadable(ValueError):
    """A media file's header cannot be read, is not of its kind, or claims more than a bound."""


@dataclass(frozen=True)
class MediaHeader:
    """A media file's format and what its header says; None where a field does not apply."""

    format: str
    width: int | None = None
    height: int | None = None
    frames: int | None = None
    fps: float | None = None
    duration: float | None = None
    samples: int | None = None
    rate: int | None = None
    channels: int | None = None


def read_header(handle: BinaryIO, size: int, kind: str) -> MediaHeader:
    """The header of an open media file of ``kind`` (``image``, ``video``, ``audio``) of ``size``
    bytes; MediaUnreadable saying why not, in words for one line."""
    try:
        header = {"image": _image, "video": _video, "audio": _audio}[kind](handle, size)
    except (BadBoxes, struct.error, EOFError, wave.Error) as exc:
        raise MediaUnreadable(f"its header cannot be read as {FORMATS[kind]} ({exc or type(exc).__name__})") from exc
    if header.width is not None and header.height is not None and header.width * header.height > MAX_PIXELS:
        raise MediaUnreadable(f"its header claims {header.width}x{header.height} pixels, over the bound of "
                              f"{MAX_PIXELS} (Pillow's MAX_IMAGE_PIXELS)")
    if header.frames is not None and header.frames > MAX_FRAMES:
        raise MediaUnreadable(f"its header claims {header.frames} frames, over the bound of {MAX_FRAMES}")
    return header


def _image(handle: BinaryIO, size: int) -> MediaHeader:
    from PIL import Image, UnidentifiedImageError  # only a build with images loads Pillow

    if handle.read(6) in (b"GIF87a", b"GIF89a"):
        handle.seek(0)
        width, height = struct.unpack("<HH", handle.read(10)[6:10])
        return MediaHeader("GIF", width, height, frames=gif_frames(handle))
    handle.seek(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the bound is checked after
            image = Image.open(handle)
    except Image.DecompressionBombError as exc:
        raise MediaUnreadable(f"its header claims more pixels than the bound of {MAX_PIXELS} ({exc})") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise MediaUnreadable(f"it is not an image Pillow opens ({exc})") from exc
    frames = None
    if image.format in ("PNG", "WEBP"):  # counted from a header chunk, not by decoding
        frames = getattr(image, "n_frames", 1)
    return MediaHeader(image.format or "unknown", image.width, image.height, frames=frames)


def gif_frames(handle: BinaryIO) -> int:
    """A GIF's frames, counted by walking its blocks (skipping every data sub-block unread) up to
    one past :data:`MAX_FRAMES`: bounded time for a file claiming a million frames."""
    handle.seek(10)
    flags = handle.read(3)[0]
    if flags & 0x80:
        handle.seek(3 << ((flags & 7) + 1), 1)  # the global colour table
    frames = 0
    while frames <= MAX_FRAMES:
        block = handle.read(1)
        if block in (b"", b";"):
            return frames
        if block == b"!":
            handle.seek(1, 1)
        elif block == b",":
            frames += 1
            descriptor = handle.read(9)
            if len(descriptor) < 9:
                raise EOFError("a frame is cut short")
            if descriptor[8] & 0x80:
                handle.seek(3 << ((descriptor[8] & 7) + 1), 1)
            handle.seek(1, 1)  # LZW minimum code size
        else:
            raise EOFError(f"unexpected block {block!r}")
        while (length := handle.read(1)) not in (b"", b"\0"):
            handle.seek(length[0], 1)
    return frames


def _audio(handle: BinaryIO, size: int) -> MediaHeader:
    start = handle.read(12)
    if start[:4] != b"RIFF" or start[8:12] != b"WAVE":
        raise MediaUnreadable(f"it is not audio dataidx reads: {FORMATS['audio']} only")
    handle.seek(0)
    with wave.open(handle) as audio:
        samples, rate, channels = audio.getnframes(), audio.getframerate(), audio.getnchannels()
    return MediaHeader("WAV", samples=samples, rate=rate, channels=channels,
                       duration=round(samples / rate, 6) if rate else None)


def _video(handle: BinaryIO, size: int) -> MediaHeader:
    if handle.read(8)[4:8] not in LEADING_BOXES:
        raise MediaUnreadable(f"it is not video dataidx reads: {FORMATS['video']} only")
    found = mp4_header(handle, size)
    frames = found["frames"]
    return MediaHeader("MP4", width=_int(found["width"]), height=_int(found["height"]), frames=_int(frames),
                       fps=found["fps"], duration=found["duration"])


def _int(value: float | int | None) -> int | None:
    return None if value is None else int(value)

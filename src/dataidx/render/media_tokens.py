"""An image's placeholder count from its size alone, where the processor's count is arithmetic.

Qwen2-VL's image processor resizes each image to a multiple of ``patch_size * merge_size`` on
each side, within ``[min_pixels, max_pixels]`` (``smart_resize``), cuts it into patches, and the
processor writes one ``<|image_pad|>`` per ``merge_size**2`` patches. So the token count of an
image is a pure function of its width and height and five settings: :func:`qwen2_vl_grid`
computes it without decoding the image (a header gives the size), and refuses, in one line,
what the processor refuses (an aspect ratio over 200) or a count that would overflow.
Groundwork for issue 53: a spec may record lengths from headers once they are proven equal to
the processor (tests/test_media_tokens.py does so on the demo images and a seeded sample).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RenderError

#: transformers' bound on an image's aspect ratio (``smart_resize`` raises above it).
MAX_ASPECT_RATIO = 200
#: The most placeholder tokens one image may take here: counts are stored as 32-bit integers.
MAX_TOKENS = (1 << 31) - 1


@dataclass(frozen=True)
class Qwen2VLImageConfig:
    """The settings the count depends on, with transformers 5.24's defaults
    (``Qwen2VLImageProcessorPil``: ``size`` = {shortest_edge: 56*56, longest_edge: 28*28*1280})."""

    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Qwen2VLImageConfig:
        """From a ``preprocessor_config.json`` (or an image processor's ``to_dict()``): ``size``'s
        ``shortest_edge``/``longest_edge`` as 5.24 names the pixel bounds, ``min_pixels``/
        ``max_pixels`` overriding them as the processor's ``__init__`` lets them."""
        size = settings.get("size") or {}
        if not isinstance(size, Mapping):
            raise RenderError(f"image processor size {size!r}: not an object with shortest_edge and longest_edge")
        defaults = cls()
        values = {
            "patch_size": settings.get("patch_size", defaults.patch_size),
            "merge_size": settings.get("merge_size", defaults.merge_size),
            "temporal_patch_size": settings.get("temporal_patch_size", defaults.temporal_patch_size),
            "min_pixels": _first(settings.get("min_pixels"), size.get("shortest_edge"), defaults.min_pixels),
            "max_pixels": _first(settings.get("max_pixels"), size.get("longest_edge"), defaults.max_pixels),
        }
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RenderError(f"image processor {name} {value!r}: not a positive integer")
        return cls(**values)


@dataclass(frozen=True)
class ImageGrid:
    """An image's patch grid (``image_grid_thw``) and its placeholder tokens."""

    t: int
    h: int
    w: int
    tokens: int


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The size Qwen2-VL's processor resizes ``height`` x ``width`` to: transformers 5.24,
    models/qwen2_vl/image_processing_pil_qwen2_vl.py ``smart_resize`` (copied there from
    image_processing_qwen2_vl.py), the same float expressions in the same order, so the same
    rounding (``round`` to even included); a refusal is a one-line :class:`RenderError`."""
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise RenderError(f"image {width}x{height}: aspect ratio {max(height, width) / min(height, width):.1f} is "
                          f"over {MAX_ASPECT_RATIO}, which Qwen2-VL's image processor refuses")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen2_vl_grid(width: int, height: int, config: Qwen2VLImageConfig | None = None) -> ImageGrid:
    """The grid and token count Qwen2-VL's image processor gives a ``width`` x ``height`` image:
    ``(1, h, w)`` patches (one image is one temporal patch, its frame repeated
    ``temporal_patch_size`` times) and ``h * w // merge_size**2`` tokens."""
    config = config or Qwen2VLImageConfig()
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RenderError(f"image {name} {value!r}: not a positive whole number of pixels")
    factor = config.patch_size * config.merge_size
    try:
        resized_height, resized_width = smart_resize(height, width, factor, config.min_pixels, config.max_pixels)
    except OverflowError:
        raise RenderError(f"image {width}x{height}: too large for Qwen2-VL's resize arithmetic") from None
    grid_h, grid_w = resized_height // config.patch_size, resized_width // config.patch_size
    tokens = grid_h * grid_w // config.merge_size**2
    if tokens > MAX_TOKENS:
        raise RenderError(f"image {width}x{height}: {tokens:,} placeholder tokens, more than the {MAX_TOKENS:,} an "
                          "entry's count may hold (raise no max_pixels that far)")
    return ImageGrid(1, grid_h, grid_w, tokens)


def _first(*values: Any) -> Any:
    return next(value for value in values if value is not None)

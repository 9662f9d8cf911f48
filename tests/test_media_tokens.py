"""Qwen2-VL's placeholder counts from an image's size alone (dataidx.render.media_tokens) equal
what transformers' image processor makes of the image itself: on every demo image, on a seeded
sample of sizes (tiny, very wide or tall, ordinary), with the defaults and with Qwen2-VL's public
settings; sizes too large to decode here (tens of thousands of pixels a side) are compared with
the processor's own count (``get_number_of_image_patches``, the same resize arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

from dataidx.errors import RenderError
from dataidx.render.media_tokens import ImageGrid, Qwen2VLImageConfig, qwen2_vl_grid

from .helpers import SHARED_DATA
from .vl_processor import qwen2_vl_image_processor

pytest.importorskip("PIL")

#: The pixel bounds Qwen2-VL-7B-Instruct's preprocessor_config.json publishes (min_pixels 3136,
#: max_pixels 12845056: 56*56 and 28*28*16384), larger than transformers' default max of 28*28*1280;
#: found quoted, with image_processor_type Qwen2VLImageProcessor, in public code (not fetched here).
PUBLIC = {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 16384}
DEMO_IMAGES = sorted((SHARED_DATA / "mllm_demo_data").glob("*.jpg"))


def sizes(seed: int, count: int) -> list[tuple[int, int]]:
    """(width, height) pairs: tiny, very wide, very tall (aspect ratios up to 200) and ordinary."""
    rng = np.random.default_rng(seed)
    found = [(1, 1), (1, 2), (27, 29), (28, 28), (56, 56), (200, 1), (1, 200), (5600, 28), (28, 5600), (2000, 10)]
    for _ in range(count):
        kind = rng.integers(4)
        if kind == 0:
            found.append((int(rng.integers(1, 64)), int(rng.integers(1, 64))))
        elif kind in (1, 2):
            short = int(rng.integers(1, 40))
            long = int(min(short * 200, rng.integers(short, 6000)))
            found.append((long, short) if kind == 1 else (short, long))
        else:
            found.append((int(rng.integers(64, 2400)), int(rng.integers(64, 2400))))
    return found


def processed(processor, image) -> ImageGrid:
    """What the processor makes of ``image``: its grid, and the tokens Qwen2VLProcessor writes for it."""
    grid = processor(images=[image], return_tensors="np")["image_grid_thw"][0].tolist()
    t, h, w = (int(value) for value in grid)
    return ImageGrid(t, h, w, t * h * w // processor.merge_size**2)


@pytest.mark.skipif(not DEMO_IMAGES, reason="../shared/data/mllm_demo_data is not beside the repo")
@pytest.mark.parametrize("settings", [{}, PUBLIC], ids=["defaults", "public"])
def test_every_demo_image_counts_as_the_processor_counts_it(settings: dict) -> None:
    from PIL import Image

    processor = qwen2_vl_image_processor(**settings)
    config = Qwen2VLImageConfig.from_settings(processor.to_dict())
    for path in DEMO_IMAGES:
        with Image.open(path) as image:
            width, height = image.size  # the header's size: nothing decoded yet
            assert qwen2_vl_grid(width, height, config) == processed(processor, image.convert("RGB")), path.name


@pytest.mark.slow  # 150 images through the processor, a second or two a setting
@pytest.mark.parametrize("settings", [{}, PUBLIC, {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 64}],
                         ids=["defaults", "public", "small"])
def test_a_seeded_sample_of_sizes_counts_as_the_processor_counts_it(settings: dict) -> None:
    from PIL import Image

    processor = qwen2_vl_image_processor(**settings)
    config = Qwen2VLImageConfig.from_settings(processor.to_dict())
    for width, height in sizes(seed=53, count=40):
        expected = processed(processor, Image.new("RGB", (width, height), (120, 30, 200)))
        assert qwen2_vl_grid(width, height, config) == expected, (width, height)


@pytest.mark.parametrize("settings", [{}, PUBLIC], ids=["defaults", "public"])
def test_huge_sizes_count_as_the_processor_counts_them(settings: dict) -> None:
    processor = qwen2_vl_image_processor(**settings)
    config = Qwen2VLImageConfig.from_settings(processor.to_dict())
    rng = np.random.default_rng(7)
    huge = [(100_000, 500), (500, 100_000), (65_535, 65_535), (40_000, 30_000), (1 << 20, 1 << 13)]
    huge += [(int(rng.integers(10_000, 200_000)), int(rng.integers(10_000, 200_000))) for _ in range(50)]
    for width, height in huge:
        if max(width, height) / min(width, height) > 200:
            continue
        patches = processor.get_number_of_image_patches(height, width, {})
        grid = qwen2_vl_grid(width, height, config)
        assert (grid.h * grid.w, grid.tokens) == (patches, patches // processor.merge_size**2), (width, height)


def test_settings_read_as_transformers_names_them() -> None:
    processor = qwen2_vl_image_processor(min_pixels=100, max_pixels=10_000)
    config = Qwen2VLImageConfig.from_settings(processor.to_dict())
    assert (config.min_pixels, config.max_pixels) == (100, 10_000)  # saved as size's shortest/longest edge
    assert Qwen2VLImageConfig.from_settings({"min_pixels": 5, "size": {"shortest_edge": 7}}).min_pixels == 5
    assert Qwen2VLImageConfig.from_settings({}) == Qwen2VLImageConfig()
    assert Qwen2VLImageConfig() == Qwen2VLImageConfig.from_settings(qwen2_vl_image_processor().to_dict())
    with pytest.raises(RenderError, match="patch_size 0: not a positive integer"):
        Qwen2VLImageConfig.from_settings({"patch_size": 0})


def test_what_the_processor_refuses_is_refused_in_one_line() -> None:
    from PIL import Image

    processor = qwen2_vl_image_processor()
    with pytest.raises(ValueError, match="aspect ratio"):
        processor(images=[Image.new("RGB", (201, 1))])
    for width, height in ((201, 1), (1, 201), (100_000, 400)):
        with pytest.raises(RenderError, match="aspect ratio .* over 200") as refused:
            qwen2_vl_grid(width, height)
        assert "\n" not in str(refused.value)
    for width, height in ((0, 10), (10, -1), (2.5, 10), (True, 10)):
        with pytest.raises(RenderError, match="not a positive whole number"):
            qwen2_vl_grid(width, height)  # type: ignore[arg-type]


def test_a_count_that_would_overflow_is_refused() -> None:
    config = Qwen2VLImageConfig(max_pixels=1 << 62)  # a bound no real processor has: counts grow with the size
    assert 10**9 < qwen2_vl_grid(1 << 20, 1 << 20, config).tokens < 1 << 31
    with pytest.raises(RenderError, match="placeholder tokens, more than the 2,147,483,647"):
        qwen2_vl_grid(1 << 26, 1 << 26, config)

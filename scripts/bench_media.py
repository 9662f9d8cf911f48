"""Image token counts from headers against running the image processor (issue 53), per image.

Qwen2-VL's placeholder count is arithmetic on an image's size (dataidx.render.media_tokens), so
the size in a JPEG's header is enough: no decoding, no resize, no patches. Timed side by side on
the same files, each path from the path to the count:

- header: PIL opens the file (which reads the header, decoding nothing) and ``qwen2_vl_grid``;
- processor: PIL decodes it, transformers' ``Qwen2VLImageProcessorPil`` (its defaults) resizes,
  normalises and cuts it into patches, and the count is its grid's product / merge_size**2,
  as ``Qwen2VLProcessor`` writes placeholders.

The images: LLaMA-Factory's 3 demo images (``../shared/data/mllm_demo_data``, when beside the
repo) and ``--media-images`` JPEGs of seeded sizes (64-2400 px a side, some 20:1) written here.
Every count is compared between the paths. Then serving: each demo entry (v1_multimodal_demo and
mllm_demo, 60 entries, when ../shared is there) fetched from a processor spec's stored tokens,
rendered on fetch, and rendered by v1's Renderer (its own with ``--llamafactory SRC``, else its
rule: the processor's template and the processor, on the prompt and the whole), entry by entry.
A section of bench.py (``--media-only``); ``--check`` does not gate it (its ranges are the main
table's).

    python scripts/bench.py --media-only
    python scripts/bench.py --media-only --media-images 50
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench_common import repeats
from scratch import scratch_folder

SHARED_IMAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "mllm_demo_data"
#: The issue's target: the header path at least this many times as fast per image.
TARGET = 20.0


def write_images(folder: Path, count: int, seed: int = 53) -> list[Path]:
    """``count`` JPEGs of seeded sizes, with content (noise over a gradient) so they decode as photos do."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(count):
        width, height = (int(side) for side in rng.integers(64, 2400, size=2))
        if number % 5 == 0:  # a wide (or tall) one
            width, height = (max(width, height), max(64, max(width, height) // 20))[:: 1 if number % 2 else -1]
        pixels = (np.linspace(0, 255, width, dtype=np.uint8)[None, :, None]
                  + rng.integers(0, 32, size=(height, width, 3), dtype=np.uint8))
        path = folder / f"{number:04d}.jpg"
        Image.fromarray(pixels.astype(np.uint8), "RGB").save(path, quality=90)
        paths.append(path)
    return paths


def header_counts(paths: list[Path], config) -> list[int]:
    from PIL import Image

    from dataidx.render.media_tokens import qwen2_vl_grid

    counts = []
    for path in paths:
        with Image.open(path) as image:  # reads the header only
            width, height = image.size
        counts.append(qwen2_vl_grid(width, height, config).tokens)
    return counts


def processor_counts(paths: list[Path], processor) -> list[int]:
    from PIL import Image

    counts = []
    for path in paths:
        with Image.open(path) as image:
            grid = processor(images=[image.convert("RGB")], return_tensors="np")["image_grid_thw"][0]
        counts.append(int(grid.prod()) // processor.merge_size**2)
    return counts


def best_seconds(run, rounds: int) -> float:
    best = float("inf")
    for _ in range(repeats(rounds)):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def media_table(work: Path, images: int) -> tuple[int, list[tuple[str, ...]], str]:
    """The two paths' figures per image, and a line saying whether every count was equal."""
    # transformers' image processing makes torch's inductor cache folder in the temporary
    # directory as it loads: a scratch folder instead, removed at exit like the rest.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(scratch_folder("dataidx-inductor-")))
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from dataidx.render.media_tokens import Qwen2VLImageConfig

    paths = sorted(SHARED_IMAGES.glob("*.jpg")) + write_images(work / "media", images)
    processor = Qwen2VLImageProcessorPil()
    config = Qwen2VLImageConfig.from_settings(processor.to_dict())
    header, ran = header_counts(paths, config), processor_counts(paths, processor)  # warm: imports, caches
    equal = sum(a == b for a, b in zip(header, ran))
    header_s = best_seconds(lambda: header_counts(paths, config), 5)
    processor_s = best_seconds(lambda: processor_counts(paths, processor), 2)
    ratio = processor_s / header_s
    lines = [("header (PIL header + qwen2_vl_grid)", f"{len(paths) / header_s:,.0f}",
              f"{1e6 * header_s / len(paths):,.1f}", f"{ratio:,.0f}x", f">= {TARGET:.0f}x",
              "ok" if ratio >= TARGET else "BELOW TARGET"),
             ("processor (decode + Qwen2VLImageProcessorPil)", f"{len(paths) / processor_s:,.0f}",
              f"{1e6 * processor_s / len(paths):,.1f}", "1x", "", "")]
    said = (f"counts equal on {equal}/{len(paths)} images (3 demo images when ../shared is there, "
            f"{images} generated); sizes {min(map(_pixels, paths)):,} to {max(map(_pixels, paths)):,} pixels")
    return len(paths), lines, said


def _pixels(path: Path) -> int:
    from PIL import Image

    with Image.open(path) as image:
        return image.size[0] * image.size[1]


def fetch_table(work: Path, llamafactory: Path | None) -> tuple[int, list[tuple[str, ...]]] | None:
    """Entries/s of serving the demos' multimodal entries three ways; None without ../shared."""
    if not SHARED_IMAGES.is_dir():
        return None
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' processor and demo entries
    from tests.test_media_render import demo_config
    from tests.vl_processor import demo_entries, qwen2_vl_processor, save_qwen2_vl_folder

    from dataidx.index import build
    from dataidx.render import render_store
    from dataidx.render.request import RenderRequest
    from dataidx.render.served import RenderedMixture

    folder = work / "media-fetch"
    folder.mkdir(parents=True, exist_ok=True)
    store, model = folder / "demos.db", save_qwen2_vl_folder(folder / "model")
    build(demo_config(folder), store)
    render_store(RenderRequest(store, model, cutoff=4096, jobs=1))
    render_store(RenderRequest(store, model, cutoff=4096, jobs=1, name="tokens", store_tokens=True))
    samples = [sample for name in ("v1_multimodal_demo", "mllm_demo") for _, _, sample in demo_entries(name)]
    v1 = _v1_render(qwen2_vl_processor(), llamafactory)
    timed: dict[str, float] = {}
    for spec in ("tokens", "default"):
        with RenderedMixture(store, spec=spec) as served:
            count = len(served)
            served.get(0)  # warm: the processor, the first image
            timed[spec] = best_seconds(lambda served=served, count=count: [served.get(k) for k in range(count)], 3)
    v1(samples[0])
    timed["v1"] = best_seconds(lambda: [v1(sample) for sample in samples], 3)
    rate = {name: len(samples) / seconds for name, seconds in timed.items()}
    label = "v1's Renderer (its source)" if llamafactory is not None else "v1's rule (template + processor, twice)"
    return len(samples), [
        ("dataidx, from stored tokens (features on fetch)", f"{rate['tokens']:,.0f}",
         f"{timed['v1'] / timed['tokens']:.1f}x"),
        ("dataidx, rendered on fetch (from headers, features on fetch)", f"{rate['default']:,.0f}",
         f"{timed['v1'] / timed['default']:.1f}x"),
        (label, f"{rate['v1']:,.0f}", "1x")]


def _v1_render(processor, llamafactory: Path | None):
    """One entry as v1 renders it: its Renderer from source, else its rule written out."""
    if llamafactory is not None:
        from tests.conformance.v1 import v1_renderer_class

        renderer = v1_renderer_class(llamafactory)(processor)
        return lambda sample: renderer.process_samples([sample])[0]

    from tests.vl_processor import hf_messages

    def rendered(sample):
        messages, images = hf_messages(sample)
        whole = processor(text=processor.apply_chat_template(messages, tokenize=False), images=images,
                          return_tensors="pt")
        prompt_images = images[:sum(1 for m in messages[:-1] for c in m["content"] if c["type"] == "image")]
        prompt = processor(text=processor.apply_chat_template(messages[:-1], tokenize=False,
                                                              add_generation_prompt=True),
                           images=prompt_images or None, return_tensors="pt")
        return whole, prompt
    return rendered

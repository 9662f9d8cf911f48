"""Write the multimodal demo: data/demo_media (three small drawn images and conversations.jsonl,
conversations about them in LLaMA-Factory v1's ``image_url`` blocks), data/demo_media.yaml, and
data/demo_vl_model, a Qwen2-VL-style model folder to render them with, nothing downloaded. The
conversations are inside the folder, not a ``data/demo_*.json*`` file: those are the text the
demo and test tokenizers are trained on, which these must not change.

The folder holds transformers' Qwen2-VL image processor settings (its defaults), the demo
tokenizer (data/demo_tokenizer) with Qwen2-VL's vision tokens added as special tokens (the
names ``Qwen2VLProcessor`` uses), and Qwen2-VL's chat template in ``chat_template.json``, as
Qwen2-VL ships it (tests/conformance/families/qwen2_vl.jinja, cited in SOURCES.md there).

    python scripts/make_demo_media.py
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw
from transformers import AddedToken, AutoTokenizer
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]


def draw_images(folder: Path) -> None:
    """Three PNGs of plain shapes, small enough that each is a few dozen image tokens."""
    folder.mkdir(parents=True, exist_ok=True)
    shapes = {"red_square.png": ((96, 96), "red", "rectangle"), "blue_bars.png": ((160, 64), "blue", "bars"),
              "green_circle.png": ((64, 128), "green", "ellipse")}
    for name, ((width, height), colour, shape) in shapes.items():
        image = Image.new("RGB", (width, height), "white")
        pen = ImageDraw.Draw(image)
        if shape == "bars":
            for left in range(8, width - 8, 24):
                pen.rectangle((left, 8, left + 12, height - 8), fill=colour)
        else:
            getattr(pen, shape)((8, 8, width - 8, height - 8), fill=colour)
        image.save(folder / name)


def turn(role: str, *blocks: tuple[str, str]) -> dict:
    return {"role": role, "content": [{"type": kind, "value": value} for kind, value in blocks]}


def rows() -> list[dict]:
    """Conversations about the images; paths relative to the data file's folder (the images')."""
    red, blue, green = ("red_square.png", "blue_bars.png", "green_circle.png")
    return [
        {"messages": [turn("user", ("image_url", red), ("text", "What shape is this?")),
                      turn("assistant", ("text", "A red square on a white background."))]},
        {"messages": [turn("user", ("text", "Count the bars."), ("image_url", blue)),
                      turn("assistant", ("text", "There are six blue bars.")),
                      turn("user", ("text", "Are they wider than they are tall?")),
                      turn("assistant", ("text", "No, each bar is taller than it is wide."))]},
        {"messages": [turn("user", ("image_url", green), ("text", "Describe the picture.")),
                      turn("assistant", ("text", "A green oval, taller than it is wide."))]},
        {"messages": [turn("user", ("image_url", red), ("image_url", green), ("text", "Which has corners?")),
                      turn("assistant", ("text", "The first one: the square has four corners."))]},
        {"messages": [turn("user", ("text", "Say hello without looking at anything.")),
                      turn("assistant", ("text", "Hello."))]},
    ]


def write_model(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(DATA / "demo_tokenizer"))
    tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in VISION_TOKENS],
                         special_tokens=True)
    tokenizer.chat_template = None  # the processor's template is in chat_template.json, as Qwen2-VL ships it
    tokenizer.save_pretrained(folder)
    Qwen2VLImageProcessorPil().save_pretrained(folder)
    config = folder / "preprocessor_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "processor_class": "Qwen2VLProcessor"},
                                 indent=2) + "\n")
    template = (REPO / "tests" / "conformance" / "families" / "qwen2_vl.jinja").read_text(encoding="utf-8")
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}, indent=2) + "\n")


if __name__ == "__main__":
    draw_images(DATA / "demo_media")
    (DATA / "demo_media" / "conversations.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows()),
                                                            encoding="utf-8")
    (DATA / "demo_media.yaml").write_text(
        "# The multimodal demo (paths relative to the repository root; image paths relative to the data\n"
        "# file's folder): conversations about three drawn images, v1's image_url blocks.\n"
        "demo_media:\n  path: data/demo_media/conversations.jsonl\n  source: local\n", encoding="utf-8")
    write_model(DATA / "demo_vl_model")
    print(f"wrote {DATA / 'demo_media'}, {DATA / 'demo_media.yaml'} and {DATA / 'demo_vl_model'}")

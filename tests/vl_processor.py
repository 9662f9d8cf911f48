"""A Qwen2-VL-style processor built here, offline, for issue 53's groundwork: what v1's Renderer
renders multimodal entries with, and what ``dataidx.render.processor_folder`` loads back.

Its parts: transformers' ``Qwen2VLImageProcessorPil`` (the PIL/numpy backend, the one that loads
without torchvision) with its defaults; a small byte-level tokenizer built as tests/conformance
builds qwen2_5's, whose added tokens (tests/conformance/families/families.json) are Qwen2-VL's
too: ``<|vision_start|>``, ``<|vision_end|>``, ``<|vision_pad|>``, ``<|image_pad|>``,
``<|video_pad|>`` among them, special (the placeholders are transformers 5.24's
``Qwen2VLProcessor`` defaults, models/qwen2_vl/processing_qwen2_vl.py); and Qwen2-VL's chat
template (tests/conformance/families/qwen2_vl.jinja, from xorbitsai/inference at ed62af21,
xinference/model/llm/models/qwen2-vl-instruct.json, see SOURCES.md there).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from .conformance import FAMILIES, build_tokenizer
from .conformance.v1 import v1_cuts
from .helpers import SHARED, SHARED_DATA, read_jsonl

#: Qwen2-VL's chat template, as its processor ships it (chat_template.json).
QWEN2_VL_TEMPLATE = (FAMILIES / "qwen2_vl.jinja").read_text(encoding="utf-8")
#: The multimodal demo datasets (under ../shared/data) and where their media paths are relative to.
DEMOS = {"v1_multimodal_demo": ("v1_multimodal_demo.jsonl", SHARED), "mllm_demo": ("mllm_demo.json", SHARED_DATA)}


def qwen2_vl_tokenizer() -> Any:
    """A small fast tokenizer built like Qwen2-VL's: tests/conformance's byte-level vocabulary with
    the Qwen2 family's added tokens (the vision tokens among them, special) and named tokens
    (``build_tokenizer("qwen2_5")``: Qwen2-VL's tokenizer_config.json has the same), and
    Qwen2-VL's chat template."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="dataidx-qwen2-vl-") as folder:
        tokenizer = AutoTokenizer.from_pretrained(build_tokenizer("qwen2_5", Path(folder)))
    tokenizer.chat_template = QWEN2_VL_TEMPLATE
    return tokenizer


def qwen2_vl_image_processor(**settings: Any) -> Any:
    """transformers' Qwen2-VL image processor, PIL backend, with its defaults (or ``settings``)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(**settings)


def qwen2_vl_processor() -> Any:
    """The processor v1's Renderer takes: dataidx's images-only ``Qwen2VLProcessor``."""
    from dataidx.render.processor_folder import images_only_processor

    return images_only_processor(qwen2_vl_image_processor(), qwen2_vl_tokenizer(), QWEN2_VL_TEMPLATE)


def save_qwen2_vl_folder(folder: Path) -> Path:
    """A model folder laid out as Qwen2-VL's is: ``preprocessor_config.json`` (naming
    ``Qwen2VLProcessor``), the tokenizer's files, and the chat template in ``chat_template.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    qwen2_vl_image_processor().save_pretrained(folder)
    config = folder / "preprocessor_config.json"  # naming its processor, as Qwen2-VL's does: AutoProcessor reads it
    config.write_text(json.dumps({**json.loads(config.read_text()), "processor_class": "Qwen2VLProcessor"}, indent=2))
    tokenizer = qwen2_vl_tokenizer()
    tokenizer.chat_template = None  # the processor's template is in chat_template.json, as Qwen2-VL ships it
    tokenizer.save_pretrained(folder)
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": QWEN2_VL_TEMPLATE}), encoding="utf-8")
    return folder


def demo_samples(name: str) -> list[dict[str, Any]]:
    """A demo dataset's v1 samples, media paths made absolute: v1_multimodal_demo is already v1's
    shape; mllm_demo goes through dataidx's ``openai`` converter (``<image>`` -> ``image_url``)."""
    filename, base = DEMOS[name]
    path = SHARED_DATA / filename
    if name == "mllm_demo":
        from dataidx.convert.formats import openai

        rows = [openai(row) for row in json.loads(path.read_text(encoding="utf-8"))]
    else:
        rows = read_jsonl(path)
    for row in rows:
        for message in row["messages"]:
            for content in message["content"]:
                if content["type"] in ("image_url", "video_url", "audio_url"):
                    content["value"] = str(base / content["value"])
    return rows


def hf_messages(sample: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """A v1 sample's messages as a chat template takes them (``{"type": "image"}`` blocks), and
    its images, opened in order."""
    from PIL import Image

    messages, images = [], []
    for message in sample["messages"]:
        content = []
        for block in message["content"]:
            if block["type"] == "image_url":
                content.append({"type": "image"})
                value = block["value"]
                if not isinstance(value, Image.Image):  # a path: decoded here, the file closed
                    with Image.open(value) as opened:
                        value = opened.convert("RGB")
                images.append(value)
            else:
                content.append({"type": "text", "text": block["value"]})
        messages.append({"role": message["role"], "content": content})
    return messages, images


def demo_entries(name: str) -> list[tuple[int, int | None, dict[str, Any]]]:
    """``(row, cut, sample)`` of each entry v1 renders from a demo dataset: one per supervised
    assistant turn, cut as v1's DataEngine cuts it (:func:`v1_cuts`)."""
    return [(row, cut, {**sample, "messages": sample["messages"][:cut]} if cut is not None else sample)
            for row, sample in enumerate(demo_samples(name)) for cut in v1_cuts(sample)]


# Qwen2-Audio: Whisper's feature extractor (numpy only, so it runs offline here), the Qwen2
# tokenizer with the family's three audio tokens, and the processor's own chat template
# (transformers 5.24, models/qwen2_audio/processing_qwen2_audio.py, default_chat_template: the
# one Qwen2-Audio-7B-Instruct's processor writes "Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>"
# with). The audio tokens are Qwen2-Audio's added tokens, special here so data text cannot forge them.
AUDIO_TOKENS = ("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>")
AUDIO_RATE = 16_000


def qwen2_audio_processor() -> Any:
    """Qwen2-Audio's processor, built offline: Whisper's feature extractor with its defaults."""
    from transformers import AddedToken, WhisperFeatureExtractor
    from transformers.models.qwen2_audio.processing_qwen2_audio import Qwen2AudioProcessor

    tokenizer = qwen2_vl_tokenizer()
    tokenizer.chat_template = None
    tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in AUDIO_TOKENS],
                         special_tokens=True)
    return Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(), tokenizer=tokenizer, chat_template=None)


def save_qwen2_audio_folder(folder: Path) -> Path:
    """A model folder laid out as Qwen2-Audio's: ``preprocessor_config.json`` (Whisper's feature
    extractor, naming ``Qwen2AudioProcessor``), the tokenizer, and ``chat_template.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    processor = qwen2_audio_processor()
    processor.feature_extractor.save_pretrained(folder)
    config = folder / "preprocessor_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "processor_class": "Qwen2AudioProcessor"},
                                 indent=2))
    processor.tokenizer.save_pretrained(folder)
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": processor.chat_template}),
                                               encoding="utf-8")
    return folder


def write_clip(path: Path, seconds: float, *, rate: int = AUDIO_RATE, channels: int = 1, seed: int = 0) -> Any:
    """A 16-bit PCM WAV of seeded noise over a tone; returns the mono waveform as v1 loads it
    (torchaudio's ``load``: samples / 32768, channels averaged)."""
    import wave

    import numpy as np

    count = int(seconds * rate)
    rng = np.random.default_rng(seed)
    tone = np.sin(2 * np.pi * (220 + 40 * seed) * np.arange(count) / rate)[:, None]
    samples = (8000 * tone + rng.normal(0, 800, size=(count, channels))).clip(-32768, 32767).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as audio:
        audio.setnchannels(channels)
        audio.setsampwidth(2)
        audio.setframerate(rate)
        audio.writeframes(samples.tobytes())
    return (samples.astype(np.float32) / 32768.0).mean(axis=1, dtype=np.float32)

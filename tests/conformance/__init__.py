"""Real chat templates of model families, with tokenizers built here like theirs, for conformance
with LLaMA-Factory v1's own Renderer (``scripts/conformance.py`` makes the goldens from it).

A family's tokenizer is one of two small BPE vocabularies trained on the repo's demo data
(``base/``): byte-level (Qwen, Llama 3, Mistral Nemo's Tekken, Phi-4, gpt-oss) or sentencepiece's
metaspace with byte fallback (Gemma, Phi-3.5, InternLM), with the model's control tokens added as
its tokenizer marks them (special or not) and its BOS/EOS/PAD/UNK named. Token ids are not the
model's, but everything the label rule depends on is: which strings are one token, which are
special, and where BPE merges across a turn boundary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FAMILIES = HERE / "families"
BASE = HERE / "base"
GOLDEN = HERE / "golden"
DEMO_DATA = HERE.parents[1] / "data"
KINDS = ("byte_level", "metaspace")
DIGEST = 10  # hex digits: a chance in 2**40 that two renderings collide


def digest(ids: list[int], labels: list[int], weights: list[float]) -> str:
    """What two renderings must share to be equal: ids, labels and weights, as one short hash."""
    text = json.dumps([ids, labels, [float(weight) for weight in weights]], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST]


def families() -> list[dict[str, Any]]:
    """Each family: ``slug``, ``model``, ``source``, ``licence``, ``tokenizer`` (see families/SOURCES.md)."""
    return json.loads((FAMILIES / "families.json").read_text(encoding="utf-8"))


def family(slug: str) -> dict[str, Any]:
    return next(entry for entry in families() if entry["slug"] == slug)


def template_text(slug: str) -> str:
    return (FAMILIES / f"{slug}.jinja").read_text(encoding="utf-8")


def build_tokenizer(slug: str, folder: Path) -> Path:
    """A tokenizer folder like family ``slug``'s: its kind of vocabulary, its added tokens with
    their special flags, its named tokens, and its chat template."""
    from tokenizers import AddedToken, Tokenizer  # here: only conformance tests and the script need them
    from transformers import PreTrainedTokenizerFast

    spec = family(slug)["tokenizer"]
    backend = Tokenizer.from_file(str(BASE / f"{spec['kind']}.json"))
    backend.add_tokens([AddedToken(token["content"], special=token["special"], normalized=False)
                        for token in spec["added_tokens"]])
    named = {key: spec[key] for key in ("bos_token", "eos_token", "pad_token", "unk_token") if spec.get(key)}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **named)
    tokenizer.chat_template = template_text(slug)
    tokenizer.save_pretrained(folder)
    return folder


def demo_texts() -> list[str]:
    """Every string in the repo's demo datasets: what the base vocabularies are trained on."""
    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [text for item in value.values() for text in strings(item)]
        if isinstance(value, list):
            return [text for item in value for text in strings(item)]
        return []

    found: list[str] = []
    for path in sorted(DEMO_DATA.glob("demo_*.json*")):
        text = path.read_text(encoding="utf-8")
        rows = json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line]
        found += strings(rows)
    return found


def train_base(kind: str) -> Any:
    """Base vocabulary ``kind`` (1,500 tokens), trained on :func:`demo_texts`; deterministic."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # here: as build_tokenizer

    if kind == "byte_level":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:  # sentencepiece-style: spaces are U+2581, bytes fall back to <0xNN> pieces
        backend = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
        backend.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(prepend_scheme="first")])
        alphabet = []
    pieces = [f"<0x{byte:02X}>" for byte in range(256)] if kind == "metaspace" else []
    trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False, initial_alphabet=alphabet,
                                  special_tokens=["<unk>"] if kind == "metaspace" else [])
    backend.train_from_iterator(demo_texts(), trainer)
    if pieces:  # byte-fallback pieces are part of the vocabulary, not added tokens
        model = json.loads(backend.to_str())
        vocab = model["model"]["vocab"]
        for piece in pieces:
            vocab.setdefault(piece, len(vocab))
        backend = Tokenizer.from_str(json.dumps(model))
    return backend

"""Train the tiny demo tokenizer in data/demo_tokenizer from the demo datasets' own text.

It exists so that `dataidx render` can be tried on a fresh machine with nothing downloaded:
a byte-level BPE of 1,000 tokens with the control tokens of the built-in templates and the
ChatML template as its own chat_template.

    python scripts/make_demo_tokenizer.py
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from dataidx.render import CHATML

DATA = Path(__file__).resolve().parents[1] / "data"
SPECIAL = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
           "<|end_header_id|>", "<|eot_id|>"]


def texts(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def corpus() -> list[str]:
    found: list[str] = []
    for path in sorted(DATA.glob("demo_*.json*")):
        lines = path.read_text(encoding="utf-8")
        rows = (json.loads(lines) if path.suffix == ".json"
                else [json.loads(line) for line in lines.splitlines() if line])
        found += texts(rows)
    return found


def main() -> None:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(DATA / "demo_tokenizer")
    print(f"wrote {DATA / 'demo_tokenizer'} ({len(tokenizer)} tokens)")


if __name__ == "__main__":
    main()

"""What tests share besides fixtures: where things are, real files written from rows, tiny tokenizers.

Tests import these (``from .helpers import write_jsonl``); fixtures live in ``conftest.py``.
Scripts import them too (``from tests.helpers import train_tokenizer``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
GOLDEN = SHARED_DATA / "golden"

requires_shared = pytest.mark.skipif(not GOLDEN.is_dir(), reason="../shared/data/golden is not beside the repo")

# Golden name -> (source file under ../shared/data, converter); None means rows are already standard.
GOLDEN_SOURCES = {
    "alpaca_en_demo": ("alpaca_en_demo.json", "alpaca"),
    "identity": ("identity.json", "alpaca"),
    "inject_demo": ("inject_demo.jsonl", "alpaca"),
    "glaive_toolcall_en_demo": ("glaive_toolcall_en_demo.json", "sharegpt"),
    "pair_demo": ("pair_demo.jsonl", "pair"),
    "v1_sft_demo": ("v1_sft_demo.jsonl", None),
    "v1_dpo_demo": ("v1_dpo_demo.jsonl", None),
    "v1_multimodal_demo": ("v1_multimodal_demo.jsonl", None),
}


def golden_config(names: list[str]) -> str:
    """YAML text of a config holding the golden datasets ``names``, as LLaMA-Factory v1 loads them."""
    lines = []
    for name in names:
        filename, converter = GOLDEN_SOURCES[name]
        lines += [f"{name}:", f"  path: {SHARED_DATA / filename}", "  source: local"]
        if converter:
            lines.append(f"  converter: {converter}")
    return "\n".join(lines) + "\n"


def read_jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def alpaca_rows(n: int) -> list[dict]:
    return [{"instruction": f"question {i}", "input": "", "output": f"answer {i}"} for i in range(n)]


def chat_rows(turns: list[int]) -> list[dict]:
    """ShareGPT rows with the given number of human/gpt exchanges each."""
    rows = []
    for r, count in enumerate(turns):
        conversation = []
        for t in range(count):
            conversation += [{"from": "human", "value": f"q{r}.{t}"}, {"from": "gpt", "value": f"a{r}.{t}"}]
        rows.append({"conversations": conversation})
    return rows


#: Control tokens of every built-in template, special in the test tokenizers.
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]
CORPUS = ["hello world, how are you today? I am fine, thanks.", "The answer is 42.", "question answer tool call",
          "user assistant system: Be brief. helpful"]


def train_tokenizer(folder: Path | None = None, *, add_bos: bool = False, vocab_size: int = 400,
                    chat_template: str | None = None, corpus: list[str] | None = None):
    """A tiny byte-level BPE trained here (nothing is downloaded), as a PreTrainedTokenizerFast.

    ``add_bos`` gives it a post-processor that prepends BOS, like Llama tokenizers.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator((corpus or CORPUS) * 20, trainer)
    if add_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", backend.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if folder is not None:
        tokenizer.save_pretrained(folder)
    return tokenizer

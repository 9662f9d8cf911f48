"""A slow (pure Python) tokenizer in a model folder of its own code, written here: a byte-level
BPE over the tiny tokenizer's vocabulary and merges (tests/helpers.py), as a ``PythonBackend``
subclass that ``tokenizer_config.json`` names through ``auto_map``, the way a model on the Hub
ships a tokenizer transformers does not have (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

from .helpers import train_tokenizer

#: The class's module, written into the folder as transformers' remote code expects it.
MODULE = "tokenization_tiny_slow"
SOURCE = '''"""A byte-level BPE in Python: the slow twin of a tiny fast tokenizer."""

import json

import regex
from transformers import PreTrainedTokenizer

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""


def _bytes_to_unicode():
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\\xa1"), ord("\\xac") + 1)) + \\
        list(range(ord("\\xae"), ord("\\xff") + 1))
    codes, extra = visible[:], 0
    for byte in range(256):
        if byte not in visible:
            visible.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(visible, map(chr, codes)))


class TinySlowTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, merges_file, **kwargs):
        with open(vocab_file, encoding="utf-8") as handle:
            self.encoder = json.load(handle)
        self.decoder = {value: key for key, value in self.encoder.items()}
        with open(merges_file, encoding="utf-8") as handle:
            merges = [line.split() for line in handle.read().split("\\n")[1:] if line.strip()]
        self.ranks = {tuple(merge): rank for rank, merge in enumerate(merges)}
        self.byte_encoder = _bytes_to_unicode()
        self.byte_decoder = {value: key for key, value in self.byte_encoder.items()}
        self.pattern = regex.compile(PATTERN)
        super().__init__(**kwargs)

    @property
    def vocab_size(self):
        return len(self.encoder)

    def get_vocab(self):
        return dict(self.encoder, **self.added_tokens_encoder)

    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get(pair, float("inf")), i) for i, pair in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == float("inf"):
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def _tokenize(self, text):
        tokens = []
        for piece in self.pattern.findall(text):
            tokens += self._bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8")))
        return tokens

    def _convert_token_to_id(self, token):
        return self.encoder.get(token, 0)

    def _convert_id_to_token(self, index):
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens):
        return bytearray(self.byte_decoder[c] for c in "".join(tokens)).decode("utf-8", errors="replace")

    def save_vocabulary(self, save_directory, filename_prefix=None):
        return ()
'''


#: A method that drops U+200B before tokenizing, as a normaliser can: the break v1's escape puts
#: into a control token's string is gone, so the string is that token again.
STRIPS_BREAKS = '''
    def prepare_for_tokenization(self, text, is_split_into_words=False, **kwargs):
        return text.replace("\\u200b", ""), kwargs
'''


def write_slow_tokenizer(folder: Path, *, chat_template: str | None = None, remote: bool = True,
                         strips_breaks: bool = False) -> Path:
    """A folder holding :data:`SOURCE`'s tokenizer over the tiny tokenizer's vocabulary; with
    ``remote`` its ``tokenizer_config.json`` names the class through ``auto_map`` (remote code);
    ``strips_breaks`` gives the class :data:`STRIPS_BREAKS`."""
    folder.mkdir(parents=True, exist_ok=True)
    fast = train_tokenizer(None)
    model = json.loads(fast.backend_tokenizer.to_str())["model"]
    added = {token_id: token for token_id, token in fast.added_tokens_decoder.items()}
    vocabulary = {token: token_id for token, token_id in model["vocab"].items() if token_id not in added}
    (folder / "vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    merges = [" ".join(merge) if isinstance(merge, list) else merge for merge in model["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    (folder / f"{MODULE}.py").write_text(SOURCE + (STRIPS_BREAKS if strips_breaks else ""), encoding="utf-8")
    config: dict[str, object] = {
        "tokenizer_class": "TinySlowTokenizer",
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "added_tokens_decoder": {str(token_id): {"content": token.content, "special": True, "lstrip": False,
                                                 "rstrip": False, "normalized": False, "single_word": False}
                                 for token_id, token in added.items()},
    }
    if remote:
        config["auto_map"] = {"AutoTokenizer": [f"{MODULE}.TinySlowTokenizer", None]}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder

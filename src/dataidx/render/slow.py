"""A slow (pure Python) tokenizer as the renderer's backend: ids as LLaMA-Factory v1 makes them, no offsets.

A fast tokenizer's Rust backend gives the renderer batches, character offsets and shared-prefix
passes (:mod:`.shared_prefix`). A slow one (transformers' ``PythonBackend``, a
``PreTrainedTokenizer`` subclass: a model's own ``tokenization_*.py``, a sentencepiece class)
has none of that, so :class:`SlowBackend` answers the few calls the renderer makes with what v1
itself calls, ``tokenizer(text, add_special_tokens=False)["input_ids"]``, one text at a time,
and each text is tokenized whole (:class:`WholeTexts`). Without offsets there is no character
fallback: where v1's prompt/whole id diff fails, or the last message is not the trained turn,
the entry is refused with v1's reason (:data:`NOT_A_PREFIX`, :data:`NOT_A_TURN`), as v1 refuses it.

Its fingerprint (:func:`slow_fingerprint`) hashes what decides its ids: its class and that
class's source file, its vocabulary files' bytes, its added and special tokens and its other
init arguments (paths and the chat template left out: a folder moved or a template changed does
not change ids; the spec hashes the template itself).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RenderError
from .digests import sha256_of
from .shared_prefix import Encoded, encode_each

#: v1's refusals (core/rendering/rendering.py at ff6d4d12), the detail of an entry it refuses.
NOT_A_PREFIX = ("prompt is not a token-prefix of the full sequence; the chat template is not prefix-stable for this "
                "turn, so diff-based labeling is unsafe (v1's refusal; a slow tokenizer has no character offsets to "
                "label by instead)")
NOT_A_TURN = ("training render expects the last message to be the supervised assistant turn (v1's refusal; a slow "
              "tokenizer has no character offsets to label other messages by)")
#: init arguments that say where a tokenizer was read from, or that do not change its ids.
_PLACES = frozenset({"name_or_path", "is_local", "local_files_only", "tokenizer_file", "chat_template", "auto_map",
                     "added_tokens_decoder", "cache_dir", "revision", "token", "_commit_hash", "trust_remote_code",
                     "model_max_length", "padding_side", "truncation_side", "clean_up_tokenization_spaces",
                     "model_input_names", "_from_auto"})


def is_slow(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is transformers' slow kind (``PythonBackend``, ``PreTrainedTokenizer``)."""
    return not getattr(tokenizer, "is_fast", False) and any(
        kind.__name__ in ("PythonBackend", "PreTrainedTokenizer") for kind in type(tokenizer).__mro__)


def refuse_other(tokenizer: Any) -> None:
    """Refuse a tokenizer neither fast nor slow in transformers' sense (a tokenizer-like object)."""
    if not getattr(tokenizer, "is_fast", False) and not is_slow(tokenizer):
        raise RenderError(f"rendering needs a transformers tokenizer (fast, or a slow PreTrainedTokenizer); "
                          f"{type(tokenizer).__name__} is neither")


@dataclass(frozen=True)
class SlowEncoding:
    """A text's ids from a slow tokenizer; it has no character offsets."""

    ids: list[int]
    offsets: None = None


class SlowBackend:
    """The calls the renderer makes of a Rust backend (``encode``, ``encode_batch``, vocabulary,
    normaliser), answered by a slow tokenizer's own ``__call__``, as v1 tokenizes."""

    #: A slow tokenizer normalises inside its own code: no normaliser to look through (.escape).
    normalizer = None

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str, add_special_tokens: bool = False) -> SlowEncoding:
        # verbose=False: no "longer than the model's maximum" warning per process; the ids are v1's call's.
        return SlowEncoding(list(self.tokenizer(text, add_special_tokens=add_special_tokens, verbose=False)
                                 ["input_ids"]))

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[SlowEncoding]:
        return [self.encode(text, add_special_tokens) for text in texts]

    encode_batch_fast = encode_batch

    def get_vocab(self, with_added_tokens: bool = True) -> dict[Any, int]:
        """Its vocabulary's tokens (bytes in tiktoken-style ones, whose length bounds characters too)."""
        vocabulary = dict(self.tokenizer.get_vocab())
        if with_added_tokens:
            vocabulary.update(self.tokenizer.added_tokens_encoder)
        return {token: i for token, i in vocabulary.items() if isinstance(token, str | bytes)}


class WholeTexts:
    """:class:`.shared_prefix.SharedPrefixes` for a slow tokenizer: every text tokenized whole
    (no offsets to find where two texts provably split)."""

    def encode(self, backend: Any, texts: Sequence[str], references: Sequence[int | None]) -> list[Encoded]:
        return [encoding if isinstance(encoding, Encoded) else Encoded(encoding.ids, encoding)
                for encoding in encode_each(backend, list(texts))]


def slow_fingerprint(tokenizer: Any) -> dict[str, Any]:
    """The state of a slow tokenizer that can change its ids (hashed by :func:`.spec.tokenizer_fingerprint`)."""
    kind = type(tokenizer)
    source = inspect.getsourcefile(kind)
    files = {}
    folder = Path(getattr(tokenizer, "name_or_path", "") or ".")
    for attribute, name in sorted(getattr(tokenizer, "vocab_files_names", {}).items()):
        given = tokenizer.init_kwargs.get(attribute)
        path = Path(given) if isinstance(given, str | os.PathLike) else folder / name
        files[name] = _sha256(path) if path.is_file() else None
    settings = {key: value for key, value in tokenizer.init_kwargs.items()
                if key not in _PLACES and key not in getattr(tokenizer, "vocab_files_names", {})}
    return {
        "class": f"{kind.__module__.rsplit('.', 1)[-1]}.{kind.__qualname__}",
        "source": _sha256(Path(source)) if source is not None and os.path.isfile(source) else None,
        "files": files,
        "added": {str(i): _plain(token) for i, token in sorted(tokenizer.added_tokens_decoder.items())},
        "special": {key: str(value) for key, value in tokenizer.special_tokens_map.items()},
        "settings": json.loads(json.dumps(settings, sort_keys=True, default=_plain)),
    }


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return sha256_of(handle)


def _plain(value: Any) -> Any:
    """An init argument as JSON: an added token as its settings, anything else as its type
    (an object's repr holds its address, which would change the fingerprint each load)."""
    if hasattr(value, "content") and hasattr(value, "special"):
        return {key: getattr(value, key, None) for key in ("content", "special", "lstrip", "rstrip", "normalized",
                                                          "single_word")}
    return type(value).__name__

"""What text each token of an entry shows, drawn as whole characters.

A byte-level BPE splits a multi-byte UTF-8 character (most of Chinese, Japanese, emoji) across
tokens, so decoding one token at a time gives U+FFFD for each piece. Here the entry's bytes are
decoded once, and each character is drawn in the box of the token that holds its *first* byte
(the text reads where it starts, left to right); a token that holds only the rest of a
character drawn before it gets ``None``: its box stays, empty, so there is still one box per
token to hover. Bytes that are not UTF-8 at all (an entry cut mid-character by truncation) are
shown as ``\\xe4``, never as U+FFFD.

The bytes of a token are known exactly for a byte-level tokenizer (GPT-2, Llama 3, Qwen and the
demo tokenizer: its vocabulary spells bytes with the GPT-2 table). For any other tokenizer the
text is decoded incrementally: a token whose decoded text would end in an incomplete character
waits for the next, and the completed text is drawn in the first box of the tokens it took.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from functools import cache
from typing import Any

_REPLACEMENT = "\ufffd"


@cache
def _byte_of() -> dict[str, int]:
    """GPT-2's table from the printable characters of a byte-level vocabulary to bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(byte): byte for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in printable:
            table[chr(256 + extra)] = byte
            extra += 1
    return table


def _is_byte_level(tokenizer: Any) -> bool:
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is None:
        return False
    try:
        return json.loads(decoder.__getstate__())["type"] == "ByteLevel"
    except (AttributeError, TypeError, ValueError, KeyError):
        return False


def token_texts(tokenizer: Any, ids: list[int]) -> list[str | None]:
    """Per token: the whole characters it starts, or None for a token that only continues one."""
    if _is_byte_level(tokenizer):
        return split_characters(_token_bytes(tokenizer, ids))
    return _incremental(tokenizer, ids)


def _token_bytes(tokenizer: Any, ids: list[int]) -> list[bytes]:
    added = {number: token.content for number, token in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    table = _byte_of()
    pieces = []
    for number, spelled in zip(ids, tokenizer.convert_ids_to_tokens(ids)):
        if number in added:  # an added or special token is its own text, not spelled in bytes
            pieces.append(added[number].encode("utf-8"))
        else:
            pieces.append(b"".join(bytes([table[c]]) if c in table else c.encode("utf-8") for c in spelled or ""))
    return pieces


def split_characters(pieces: list[bytes]) -> list[str | None]:
    """Each token's bytes → the characters whose first byte it holds (None: it holds only the
    rest of a character an earlier token starts)."""
    starts, offset = [], 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
    texts: list[list[str]] = [[] for _ in pieces]
    offset = 0
    for character in b"".join(pieces).decode("utf-8", "surrogateescape"):
        escaped = "\udc80" <= character <= "\udcff"  # a byte that is not UTF-8
        texts[bisect_right(starts, offset) - 1].append(f"\\x{ord(character) - 0xDC00:02x}" if escaped else character)
        offset += 1 if escaped else len(character.encode("utf-8"))
    return ["".join(text) if text or not piece else None for text, piece in zip(texts, pieces)]


def _incremental(tokenizer: Any, ids: list[int]) -> list[str | None]:
    texts: list[str | None] = [None] * len(ids)
    first = 0  # the first token whose text is not drawn yet
    for end in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[first:end])
        if not text.endswith(_REPLACEMENT) or end == len(ids):
            texts[first] = text.replace(_REPLACEMENT, "\\ufffd")
            first = end
    return texts

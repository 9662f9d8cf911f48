"""One tokenizer pass for texts that share a prefix: an entry's prompt and its whole, the cuts of
one conversation, the two sides of a preference pair.

v1's labels tokenize each entry twice (the whole, and the prompt to diff against it), and each cut
of a conversation tokenizes everything before it again. Both are exact to derive from one
encoding, because a Hugging Face tokenizer finds its added tokens in the raw text before anything
else and normalizes, pre-tokenizes and models each piece between them on its own: the ids of a
text are the ids of its pieces, one after another.

So when ``text`` and an encoded ``reference`` agree up to character ``c``, and an added token X
(an *anchor*) lies in the reference at ``s:e`` with ``e <= c``, then ``ids(text)`` is the
reference's ids before X followed by ``ids(text[s:])``, provided both texts split at ``s``. They
do when X is matched as written (not normalized, no ``lstrip``/``rstrip``/``single_word``), no
added token has X's first character anywhere but first (so no match can start before ``s`` and
cover it), and the tail's own first token is X (no longer added token starts at ``s`` in
``text``). Anchors are chosen once per tokenizer; a text with no anchor in reach, or whose tail
does not start with its anchor, is tokenized whole: never guessed at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: How many tokens back from the end of the shared prefix an anchor is looked for: a template
#: writes one within a message or two of any place a turn ends.
ANCHOR_REACH = 512


def common_prefix(a: str, b: str) -> int:
    """Characters ``a`` and ``b`` share from their start (string comparisons in C, halving)."""
    if b.startswith(a):
        return len(a)
    if a.startswith(b):
        return len(b)
    low, high = 0, min(len(a), len(b))  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class Encoded:
    """A text's ids, and its encoding where it was tokenized whole (offsets, for character spans)."""

    ids: list[int]
    encoding: Any = None


class SharedPrefixes:
    """Tokenizes texts of which some are known to share prefixes with others, once per prefix.

    Example::

        shared = SharedPrefixes(backend)
        whole, prompt = shared.encode(backend, [whole_text, prompt_text], [None, 0])   # prompt: derived from 0

    The backend is passed on every call (the renderer's: a test may record what it is sent).
    """

    def __init__(self, backend: Any) -> None:
        added = backend.get_added_tokens_decoder()
        contents = [token.content for token in added.values() if token.content]
        inner = {character for content in contents for character in content[1:]}
        #: anchor id -> its text: added tokens at which every text provably splits
        self.anchors: dict[int, str] = {
            token_id: token.content for token_id, token in added.items()
            if token.content and not (token.normalized or token.lstrip or token.rstrip or token.single_word)
            and token.content[0] not in inner
            and not any(other != token.content and other.startswith(token.content) for other in contents)}
        # BPE dropout tokenizes a text differently each time: nothing is derived from another pass then.
        self.usable = bool(self.anchors) and not getattr(backend.model, "dropout", None)

    def encode(self, backend: Any, texts: Sequence[str], references: Sequence[int | None]) -> list[Encoded]:
        """Each text's ids. ``references[k]`` is the index of a text that ``texts[k]`` likely shares
        a prefix with (one whose own reference is None), or None to tokenize ``texts[k]`` whole."""
        roots = [k for k, reference in enumerate(references) if reference is None or not self.usable]
        found: list[Encoded | None] = [None] * len(texts)
        for k, encoding in zip(roots, _encoded(backend, [texts[k] for k in roots])):
            found[k] = Encoded(encoding.ids, encoding)
        tails: list[tuple[int, int, int]] = []  # (text, reference, anchor token)
        whole: list[int] = []
        for k, reference in enumerate(references):
            if found[k] is not None:
                continue
            assert reference is not None and found[reference] is not None, "a reference is a root"
            anchor = self._anchor(found[reference], texts[reference], texts[k])
            if anchor is None:
                whole.append(k)
            else:
                tails.append((k, reference, anchor))
        texts_of_tails = [texts[k][self._start(found[reference], token):] for k, reference, token in tails]
        for (k, reference, token), tail in zip(tails, _fast(backend, texts_of_tails)):
            base = found[reference]
            assert base is not None
            tail_ids = tail.ids
            if tail_ids and tail_ids[0] == base.ids[token]:
                found[k] = Encoded(base.ids[:token] + tail_ids)
            else:  # a longer added token starts at the anchor in this text: no split there
                whole.append(k)
        for k, encoding in zip(whole, _encoded(backend, [texts[k] for k in whole])):
            found[k] = Encoded(encoding.ids, encoding)
        return [encoded for encoded in found if encoded is not None]

    def _anchor(self, reference: Encoded | None, reference_text: str, text: str) -> int | None:
        """The token index of the last anchor of ``reference`` that ends where both texts agree."""
        assert reference is not None and reference.encoding is not None
        shared = common_prefix(reference_text, text)
        if shared == 0:
            return None
        last = reference.encoding.char_to_token(shared - 1)
        if last is None:
            return None
        ids, anchors, offsets = reference.ids, self.anchors, reference.encoding.token_to_chars
        for token in range(last, max(last - ANCHOR_REACH, -1), -1):
            content = anchors.get(ids[token])
            if content is not None:
                start, end = offsets(token)
                if end <= shared and end - start == len(content) and reference_text.startswith(content, start):
                    return token
        return None

    @staticmethod
    def _start(reference: Encoded | None, token: int) -> int:
        assert reference is not None and reference.encoding is not None
        return reference.encoding.token_to_chars(token)[0]


def _encoded(backend: Any, texts: list[str]) -> list[Any]:
    return backend.encode_batch(texts, add_special_tokens=False) if texts else []


def _fast(backend: Any, texts: list[str]) -> list[Any]:
    """Encodings without offsets (a third less work): a tail needs only its ids."""
    return backend.encode_batch_fast(texts, add_special_tokens=False) if texts else []

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

A text the tokenizer fails on (its own error, or a Rust panic: a pre-tokenizer pattern that
backtracks past its limit) fails alone: a batch that raises is tokenized again a text at a time,
and only the texts that fail again are marked, so the entry they belong to becomes a
``render_error`` and no other (:func:`checked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import RenderError, bounded

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
    """A text's ids, and its encoding where it was tokenized whole (offsets, for character spans);
    or, where the tokenizer failed on the text, what it said (``failed``) and no ids."""

    ids: list[int]
    encoding: Any = None
    failed: str | None = None


def checked(*encoded: Any) -> None:
    """Raise the ``render_error`` of an entry whose text the tokenizer failed on (``encoded``: its
    texts' :class:`Encoded`, or encodings, which never fail)."""
    for one in encoded:
        if (failed := getattr(one, "failed", None)) is not None:
            raise RenderError(f"the tokenizer failed on the entry's text: {failed}", cause="tokenizer")


class SharedPrefixes:
    """Tokenizes texts of which some are known to share prefixes with others, once per prefix.

    Example::

        shared = SharedPrefixes(backend)
        whole, prompt = shared.encode(backend, [whole_text, prompt_text], [None, 0])   # prompt: derived from 0

    The backend is passed on every call (the renderer's: a test may record what it is sent).
    """

    def __init__(self, backend: Any) -> None:
        added = backend.get_added_tokens_decoder()
        contents = sorted({token.content for token in added.values() if token.content})
        inner = {character for content in contents for character in content[1:]}
        # A text that another added token starts with: in sorted order, the texts that start with
        # one come right after it (n log n; comparing every pair took 28 s at 10,000 added tokens).
        prefixes = {text for text, after in zip(contents, contents[1:]) if after.startswith(text)}
        #: anchor id -> its text: added tokens at which every text provably splits
        self.anchors: dict[int, str] = {
            token_id: token.content for token_id, token in added.items()
            if token.content and not (token.normalized or token.lstrip or token.rstrip or token.single_word)
            and token.content[0] not in inner and token.content not in prefixes}
        # BPE dropout tokenizes a text differently each time: nothing is derived from another pass then.
        self.usable = bool(self.anchors) and not getattr(backend.model, "dropout", None)

    def encode(self, backend: Any, texts: Sequence[str], references: Sequence[int | None]) -> list[Encoded]:
        """Each text's ids. ``references[k]`` is the index of a text that ``texts[k]`` likely shares
        a prefix with (one whose own reference is None), or None to tokenize ``texts[k]`` whole."""
        roots = [k for k, reference in enumerate(references) if reference is None or not self.usable]
        found: list[Encoded | None] = [None] * len(texts)
        for k, encoding in zip(roots, encode_each(backend, [texts[k] for k in roots])):
            found[k] = encoding if isinstance(encoding, Encoded) else Encoded(encoding.ids, encoding)
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
        for (k, reference, token), tail in zip(tails, encode_each(backend, texts_of_tails, offsets=False)):
            base = found[reference]
            assert base is not None
            tail_ids = tail.ids
            if tail_ids and tail_ids[0] == base.ids[token]:
                found[k] = Encoded(base.ids[:token] + tail_ids)
            else:  # a longer added token starts at the anchor in this text (or the tail failed): no split there
                whole.append(k)
        for k, encoding in zip(whole, encode_each(backend, [texts[k] for k in whole])):
            found[k] = encoding if isinstance(encoding, Encoded) else Encoded(encoding.ids, encoding)
        return [encoded for encoded in found if encoded is not None]

    def _anchor(self, reference: Encoded | None, reference_text: str, text: str) -> int | None:
        """The token index of the last anchor of ``reference`` that ends where both texts agree."""
        assert reference is not None
        if reference.encoding is None:  # the tokenizer failed on it: the text is tokenized whole
            return None
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


def encode_each(backend: Any, texts: list[str], *, offsets: bool = True) -> list[Any]:
    """The encodings of ``texts`` in one batch (``offsets=False``: without offsets, a third less
    work), or where the tokenizer fails on the batch, each text's alone: a text it fails on again
    gives an :class:`Encoded` that says how, with no ids. Only a failing batch costs more."""
    encode = backend.encode_batch if offsets else backend.encode_batch_fast
    try:
        return encode(texts, add_special_tokens=False) if texts else []
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: B036 - a Rust panic is pyo3's PanicException, a BaseException
        pass
    found = []
    for text in texts:
        try:
            found += encode([text], add_special_tokens=False)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: B036 - as above: this text's own failure
            found.append(Encoded([], failed=bounded(" ".join(str(exc).split()) or type(exc).__name__, 200)))
    return found


def private_backend(tokenizer: Any) -> Any:
    """A copy of the tokenizer's Rust backend with truncation and padding off."""
    from tokenizers import Tokenizer  # here, not at import: a Rust library only rendering needs

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend

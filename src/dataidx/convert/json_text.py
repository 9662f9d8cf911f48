"""``json.loads`` and ``json.dumps`` with their defaults, made once instead of on every call.

v1's converters read every function call and a row's ``tools`` as JSON and write them back
(``json.dumps(json.loads(text))``), and a fetch does the same: on tool-call data that is a fifth
of fetching a sample. ``json.dumps`` builds a new C encoder on every call and ``json.loads`` goes
through two Python methods before the C scanner; for a 60-character call that overhead is most
of the 6.5 us. Here the C scanner and encoder are made once at import, with exactly the settings
the two functions use, so the text and values are the same (tests compare them on generated
JSON); anything the fast path does not accept goes to ``json.loads`` itself, which then answers
or raises as it always does. Where this Python has no C accelerator, both are the plain functions.
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
from collections.abc import Callable
from typing import Any

#: What json.loads skips around a document (json.decoder's ``WHITESPACE``).
_SPACE = " \t\n\r"
#: A value whose text shows every setting of json.dumps the encoder is made with.
_PROBE = {"key": [1, 2.5, float("nan"), None, True, "\u00e9\n"], "empty": {}}


def _scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    # The C parts by name, None where this Python lacks them (typeshed does not list them).
    make = getattr(json.scanner, "c_make_scanner", None)
    return None if make is None else make(json.JSONDecoder())


def _encoder() -> Callable[[Any, int], Any] | None:
    make = getattr(json.encoder, "c_make_encoder", None)
    escape = getattr(json.encoder, "c_encode_basestring_ascii", None)
    if make is None or escape is None:
        return None
    try:
        # JSONEncoder.iterencode's own call, json.dumps's defaults: ensure_ascii, ", " and ": ",
        # NaN allowed, keys unsorted. No cycle markers: a value read from JSON or Arrow has none.
        encode = make(None, json.JSONEncoder().default, escape, None, ": ", ", ", False, False, True)
        # Another Python may order the arguments otherwise: used only where it writes json.dumps's text.
        return encode if "".join(encode(_PROBE, 0)) == json.dumps(_PROBE) else None
    except TypeError:  # another Python's signature: the plain function, never a guess
        return None


_SCAN = _scanner()
_ENCODE = _encoder()


def loads(text: Any) -> Any:
    """``json.loads(text)``: the same value, or the same exception."""
    if _SCAN is not None and text.__class__ is str:
        try:
            value, end = _SCAN(text, len(text) - len(text.lstrip(_SPACE)))
            if end == len(text) or not text[end:].strip(_SPACE):
                return value
        except (StopIteration, ValueError):
            pass  # json.loads says why, as it always has
    return json.loads(text)


def dumps(value: Any) -> str:
    """``json.dumps(value)`` with its defaults: the same text, for a value read from JSON or
    Arrow (one that holds itself would recurse to a RecursionError, not json's ValueError)."""
    if _ENCODE is None:
        return json.dumps(value)
    return "".join(_ENCODE(value, 0))

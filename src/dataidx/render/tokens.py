"""Stored tokens: one word per token with the supervised bit in it, and loss weights as runs.

A rendered entry is ``input_ids``, ``labels`` (the id where supervised, ``IGNORE`` elsewhere) and
``loss_weights``; the labels follow from the ids and one bit per token, and v1's weights are per
message, so a few runs of equal weight hold them all. A word is ``id | supervised << top``: 16
bits when the vocabulary has at most 2^15 ids, else 32. Weights are stored only when they are
not the usual ones (supervised 1.0, the rest 0.0), as little-endian ``(uint32 count, float64
weight)`` runs over every token, so any float a converter wrote comes back bit for bit. A
preference pair is its chosen side's words then its rejected side's, ``side_tokens`` apart.

:func:`served` turns stored words back into the dicts :meth:`.Rendered.as_dict` gives, a batch at
a time with NumPy, importing neither a tokenizer nor Jinja.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import RenderError
from .rendered import IGNORE, Rendered

#: ``(count, weight)`` runs of loss weights, as ``token_weights`` stores them.
RUN = np.dtype([("count", "<u4"), ("weight", "<f8")])
#: The largest vocabulary 16-bit words hold (one bit is the supervised flag).
WORD16_VOCABULARY = 2**15
WORD32_VOCABULARY = 2**31


def word_dtype(vocabulary: int) -> np.dtype:
    """Little-endian words for a vocabulary of ``vocabulary`` ids: 16 bits where they fit."""
    if vocabulary <= WORD16_VOCABULARY:
        return np.dtype("<u2")
    if vocabulary <= WORD32_VOCABULARY:
        return np.dtype("<u4")
    raise RenderError(f"a vocabulary of {vocabulary} ids does not fit 31-bit token words")


@dataclass(frozen=True, kw_only=True)
class StoredTokens:
    """One entry's words and what ``entry_renders`` keeps beside them."""

    words: np.ndarray
    side_tokens: int | None
    weights: bytes | None


def encode(rendered: Rendered, dtype: np.dtype) -> StoredTokens:
    """An entry's words: its ids, each with the supervised bit; its weights as runs when unusual."""
    sides = list(rendered.sides.values()) if rendered.sides is not None else [rendered]
    ids = np.array([i for side in sides for i in side.input_ids], dtype=np.int64)
    labels = np.array([label for side in sides for label in side.labels], dtype=np.int64)
    weights = np.array([weight for side in sides for weight in side.loss_weights], dtype=np.float64)
    supervised = labels != IGNORE
    top = dtype.itemsize * 8 - 1
    if ids.size and (ids.min() < 0 or ids.max() >= 1 << top):
        raise RenderError(f"token id {int(ids.max())} does not fit {top}-bit token words")
    if not np.array_equal(labels[supervised], ids[supervised]):
        raise RenderError("an entry's labels are not its ids where supervised: it cannot be stored as tokens")
    words = (ids | (supervised.astype(np.int64) << top)).astype(dtype)
    usual = np.array_equal(weights.view(np.uint64), supervised.astype(np.float64).view(np.uint64))  # bit for bit
    side_tokens = len(sides[0].input_ids) if rendered.sides is not None else None
    return StoredTokens(words=words, side_tokens=side_tokens, weights=None if usual else weight_runs(weights))


def weight_runs(weights: np.ndarray) -> bytes:
    """``weights`` as runs of equal value (compared bit for bit, so -0.0 and NaN come back as written)."""
    bits = weights.view(np.uint64)
    starts = np.flatnonzero(np.concatenate(([True], bits[1:] != bits[:-1])))
    runs = np.empty(len(starts), dtype=RUN)
    runs["count"] = np.diff(np.append(starts, len(weights)))
    runs["weight"] = weights[starts]
    return runs.tobytes()


@dataclass
class TokenChunk:
    """What one render chunk stores: its training entries' words, in entry order."""

    dtype: np.dtype
    #: ``(entry id, words, side tokens, weights, extra info)`` in the order rendered
    parts: list[tuple[int, np.ndarray, int | None, bytes | None, str | None]] = field(default_factory=list)

    def add(self, entry_id: int, rendered: Rendered) -> None:
        stored = encode(rendered, self.dtype)
        self.parts.append((entry_id, stored.words, stored.side_tokens, stored.weights, rendered.extra_info))

    def finished(self) -> tuple[np.ndarray, list[EntryWords]]:
        """The chunk's words in entry order and per entry ``(entry id, tokens, side tokens, weights,
        extra info)``."""
        self.parts.sort(key=lambda part: part[0])
        words = (np.concatenate([part[1] for part in self.parts]) if self.parts
                 else np.empty(0, dtype=self.dtype))
        return words, [(entry_id, len(w), side, weights, info) for entry_id, w, side, weights, info in self.parts]


#: One entry of a chunk's words: ``(entry id, tokens, side tokens, weights, extra info)``.
EntryWords = tuple[int, int, "int | None", "bytes | None", "str | None"]
#: What serving needs of one entry: ``(offset, tokens, side tokens, weights, extra info)``.
TokenRow = tuple[int, int, "int | None", "bytes | None", "str | None"]


def served(words: np.ndarray, rows: Sequence[TokenRow], names: Sequence[str]) -> list[dict[str, Any]]:
    """The served dicts of stored entries (``{"_dataset_name": names[k], **Rendered.as_dict()}``,
    ``extra_info`` included where the entry has one).

    One entry is decoded alone; a batch is read from the mapped words in stored order
    (sequential pages), decoded in one NumPy pass, turned into Python lists once, and cut back
    into per-entry lists (list slices) in the order asked.
    """
    if not rows:
        return []
    words = np.asarray(words)  # a plain view: a memmap's slices each run Python (__array_finalize__)
    if len(rows) == 1:
        order = [0]
        chunk = words[rows[0][0]: rows[0][0] + rows[0][1]]
    else:
        order = sorted(range(len(rows)), key=lambda k: rows[k][0])
        chunk = np.concatenate([words[rows[k][0]: rows[k][0] + rows[k][1]] for k in order])
    bounds = [0]  # where each side (an entry, or a pair's chosen and rejected) starts in chunk, and its end
    for k in order:
        _, tokens, side_tokens, _, _ = rows[k]
        if side_tokens is not None:
            bounds.append(bounds[-1] + side_tokens)
        bounds.append(bounds[-1] + tokens - (side_tokens or 0))
    sides = iter(_decoded(chunk, words.dtype.itemsize * 8 - 1, bounds))
    out: list[dict[str, Any]] = [{}] * len(rows)
    for k in order:
        _, tokens, side_tokens, weights, info = rows[k]
        stored = None if weights is None else unrun(weights).tolist()
        if stored is not None and len(stored) != tokens:
            raise RenderError(f"stored loss weights cover {len(stored)} tokens of an entry of {tokens}")
        if side_tokens is None:
            ids, labels, usual = next(sides)
            out[k] = {"_dataset_name": names[k], "input_ids": ids, "labels": labels,
                      "loss_weights": usual if stored is None else stored, "attention_mask": [1] * tokens}
        else:
            chosen, rejected = next(sides), next(sides)
            out[k] = {"_dataset_name": names[k],
                      "chosen": _side(chosen, None if stored is None else stored[:side_tokens]),
                      "rejected": _side(rejected, None if stored is None else stored[side_tokens:])}
        if info is not None:
            out[k]["extra_info"] = info
    return out


#: One side decoded: its ids, labels and the usual loss weights (1.0 where supervised, else 0.0).
Side = tuple[list[int], list[int], list[float]]


def _decoded(chunk: np.ndarray, top: int, bounds: list[int]) -> list[Side]:
    """The sides of ``chunk`` between consecutive ``bounds``. Under v1's labels each side is its
    unsupervised prompt, then its supervised answer: labels and weights are then lists joined, not
    computed per token (one ``tolist`` for the whole chunk); any other pattern takes NumPy."""
    mask = (1 << top) - 1
    ids = (chunk & mask).tolist()
    supervised = chunk >> top
    heads = _prompt_tokens(supervised, bounds)
    edges = zip(bounds, bounds[1:])
    if heads is not None:
        return [(ids[a:b], [IGNORE] * k + ids[a + k: b], [0.0] * k + [1.0] * (b - a - k))
                for (a, b), k in zip(edges, heads)]
    labels = np.where(supervised == 1, (chunk & mask).astype(np.int64), IGNORE).tolist()
    weights = supervised.astype(np.float64).tolist()
    return [(ids[a:b], labels[a:b], weights[a:b]) for a, b in edges]


def _prompt_tokens(supervised: np.ndarray, bounds: list[int]) -> list[int] | None:
    """Per side, how many unsupervised tokens come before its supervised ones, when every side is
    unsupervised tokens then supervised ones (v1's labels); None when one is not (or is empty)."""
    if len(bounds) == 2:
        head = bounds[1] - int(np.count_nonzero(supervised))
        return [head] if supervised[head:].all() else None
    starts = bounds[:-1]
    if any(a >= b for a, b in zip(bounds, bounds[1:])):
        return None
    # A side is prompt-then-answer when no supervised token is followed by an unsupervised one inside it.
    drops = np.flatnonzero(supervised[1:] < supervised[:-1]) + 1
    if not set(drops.tolist()).issubset(starts):
        return None
    answers = np.add.reduceat(supervised, starts, dtype=np.int64).tolist()
    return [b - a - answer for a, b, answer in zip(bounds, bounds[1:], answers)]


def _side(side: Side, weights: list[float] | None) -> dict[str, Any]:
    ids, labels, usual = side
    return {"input_ids": ids, "labels": labels, "loss_weights": usual if weights is None else weights,
            "attention_mask": [1] * len(ids)}


def unrun(weights: bytes) -> np.ndarray:
    """Per-token loss weights (float64) from the runs ``token_weights`` stores."""
    runs = np.frombuffer(weights, dtype=RUN)
    return np.repeat(runs["weight"], runs["count"].astype(np.int64))

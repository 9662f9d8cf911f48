"""Fingerprints: a 64-bit number per entry, and per prompt side, that equal entries always share,
computed in NumPy over whole Arrow columns.

Why not the digest itself: the build must find exact duplicates for a tenth of its own time (50
ns an entry on the bench), and one Python call per entry, an xxh3 of its bytes, costs three times
that. A message's fingerprint mixes its role with its blocks' (type and text, :mod:`.text_prints`),
an entry's its messages' in order. Equal messages give equal fingerprints, in any format, so an
entry whose fingerprint no other entry has is no exact duplicate; those that meet are candidates,
and :mod:`.digests` hashes their whole messages to decide (:mod:`dataidx.index.exact`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from .expansion import is_document
from .text_prints import KEYS, mix, text_prints

_ROLE, _BLOCK, _COUNT, _DOCUMENT, _PAIR = range(4, 9)
ROLE_CODES = {"system": 1, "user": 2, "assistant": 3, "tool": 4}
_BLOCK_CODES = {"text": 1, "reasoning": 2, "tool_call": 3, "image_url": 4, "video_url": 5, "audio_url": 6}


def block_code(kind: Any) -> int:
    """A content block type's code; a type outside the standard ones by its name's hash."""
    code = _BLOCK_CODES.get(kind) if isinstance(kind, str) else None
    return code if code is not None else xxhash.xxh3_64_intdigest(str(kind).encode("utf-8", "surrogatepass")) | 1


def role_code(role: Any) -> int:
    code = ROLE_CODES.get(role) if isinstance(role, str) else None
    return code if code is not None else xxhash.xxh3_64_intdigest(str(role).encode("utf-8", "surrogatepass")) | 1


def messages_of(roles: np.ndarray | int, block_sums: np.ndarray) -> np.ndarray:
    """Messages' fingerprints from their role codes (or one for all) and their blocks' weighted sums."""
    if isinstance(roles, int):
        return mix(block_sums + np.uint64(roles * int(KEYS[_ROLE]) % (1 << 64)))
    return mix(roles.astype(np.uint64) * KEYS[_ROLE] + block_sums)


def text_blocks(texts: np.ndarray) -> np.ndarray:
    """The block sum of a message whose content is one text block (the fast paths' messages)."""
    return texts + np.uint64(_BLOCK_CODES["text"]) * KEYS[_BLOCK]


def block_weights(texts: np.ndarray, codes: np.ndarray, places: np.ndarray) -> np.ndarray:
    """Blocks' parts of their message's block sum: text and type, weighted by the block's place."""
    return (texts + codes.astype(np.uint64) * KEYS[_BLOCK]) * (2 * places + 1).astype(np.uint64)


@dataclass(frozen=True)
class EntryPrints:
    """Per entry of a chunk, in entry order: its fingerprint, its prompt side's (0 where it has
    none) and whether it has a prompt side (an entry with a cut above 1)."""

    messages: np.ndarray
    prompts: np.ndarray
    has_prompt: np.ndarray


def sequence_prints(weighted: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Message sequences' fingerprints from their messages' weighted sums and their lengths."""
    return mix(weighted + count.astype(np.uint64) * KEYS[_COUNT])


def _sequences(weighted_prefix: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    return sequence_prints(weighted_prefix[first + count] - weighted_prefix[first], count)


def entry_prints(messages: np.ndarray, row_first: np.ndarray, rows: np.ndarray, cuts: np.ndarray) -> EntryPrints:
    """Entries' fingerprints from their rows' messages (``row_first``: each row's first message,
    len rows + 1): an entry's first ``cut`` messages (all for a cut below 0), its prompt side
    the first ``cut - 1``; each message weighted by its place in the row."""
    position = np.arange(len(messages), dtype=np.int64) - np.repeat(row_first[:-1], np.diff(row_first))
    weighted = np.zeros(len(messages) + 1, np.uint64)
    np.cumsum(messages * (2 * position + 1).astype(np.uint64), out=weighted[1:])
    first = row_first[rows]
    whole = cuts < 0
    count = np.where(whole, row_first[rows + 1] - first, cuts)
    has_prompt = ~whole & (cuts > 1)
    prompts = np.where(has_prompt, _sequences(weighted, first, np.maximum(count - 1, 0)), np.uint64(0))
    return EntryPrints(_sequences(weighted, first, count), prompts, has_prompt)


def documents(texts: np.ndarray) -> EntryPrints:
    """Documents' fingerprints (one entry each, no prompt side)."""
    return EntryPrints(mix(texts + KEYS[_DOCUMENT]), np.zeros(len(texts), np.uint64), np.zeros(len(texts), bool))


def concatenated_prints(parts: Sequence[EntryPrints]) -> EntryPrints:
    if not parts:
        return EntryPrints(np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, bool))
    return EntryPrints(*(np.concatenate([getattr(part, name) for part in parts])
                         for name in ("messages", "prompts", "has_prompt")))


class SamplePrints:
    """Fingerprints of converted samples' entries, gathered a row at a time and computed once per
    chunk with the same arithmetic as the vectorised paths (tests/test_digests.py)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.block_codes: list[int] = []
        self.block_message: list[int] = []
        self.block_place: list[int] = []
        self.roles: list[int] = []
        self.run_first: list[int] = [0]  # a run: one sample's messages (a pair: one side)
        #: per entry: kind (0 messages, 1 document, 2 pair), its run (the chosen side's), its cut (-1 whole)
        self.entries: list[tuple[int, int, int]] = []

    def _run(self, messages: Any) -> int:
        for message in messages or []:
            if not isinstance(message, dict):
                message = {}
            for place, block in enumerate(message.get("content") or []):
                block = block if isinstance(block, dict) else {}
                value = block.get("value")
                self.values.append(value if isinstance(value, str) else str(value))
                self.block_codes.append(block_code(block.get("type")))
                self.block_message.append(len(self.roles))
                self.block_place.append(place)
            self.roles.append(role_code(message.get("role")))
        self.run_first.append(len(self.roles))
        return len(self.run_first) - 2

    def add(self, sample: Mapping[str, Any], cuts: Sequence[int | None]) -> None:
        """One sample's entries, ``cuts`` as :func:`.expansion.cuts` gives them (None: whole)."""
        if is_document(sample):
            text = sample.get("text")
            self.values.append(text if isinstance(text, str) else "")
            self.block_codes.append(0)
            self.block_message.append(-1)  # a document's text belongs to no message
            self.block_place.append(len(self.entries))
            self.entries += [(1, len(self.values) - 1, -1)] * len(cuts)
        elif sample.get("messages") is None and sample.get("chosen_messages") is not None:
            chosen = self._run(sample.get("chosen_messages"))
            self._run(sample.get("rejected_messages"))
            self.entries += [(2, chosen, -1)] * len(cuts)
        else:
            run = self._run(sample.get("messages"))
            self.entries += [(0, run, -1 if cut is None else cut) for cut in cuts]

    def result(self) -> EntryPrints:
        texts = text_prints(pa.array(self.values, pa.string()))
        in_message = np.array(self.block_message, dtype=np.int64) >= 0
        blocks = block_weights(texts, np.array(self.block_codes, dtype=np.uint64),
                               np.array(self.block_place, dtype=np.int64))
        sums = np.zeros(len(self.roles), np.uint64)
        np.add.at(sums, np.array(self.block_message, dtype=np.int64)[in_message], blocks[in_message])
        messages = messages_of(np.array(self.roles, dtype=np.uint64), sums)
        run_first = np.array(self.run_first, dtype=np.int64)
        kinds, runs, cuts = (np.array([entry[k] for entry in self.entries], dtype=np.int64) for k in range(3))
        found = EntryPrints(np.zeros(len(kinds), np.uint64), np.zeros(len(kinds), np.uint64),
                            np.zeros(len(kinds), bool))
        for kind, where in ((kind, np.flatnonzero(kinds == kind)) for kind in (0, 1, 2)):
            if not len(where):
                continue
            if kind == 1:
                part = documents(texts[runs[where]])
            elif kind == 0:
                part = entry_prints(messages, run_first, runs[where], cuts[where])
            else:
                chosen, rejected = (entry_prints(messages, run_first, runs[where] + side, np.full(len(where), -1))
                                    for side in (0, 1))
                length = run_first[runs[where] + 1] - run_first[runs[where]]
                prompt = entry_prints(messages, run_first, runs[where], length)
                part = EntryPrints(mix(chosen.messages * KEYS[_PAIR] + rejected.messages), prompt.prompts,
                                   prompt.has_prompt)
            found.messages[where], found.prompts[where], found.has_prompt[where] = (part.messages, part.prompts,
                                                                                     part.has_prompt)
        return found

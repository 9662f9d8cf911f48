"""One sample from a conversation's cuts: a chain (every cut a prefix of the next) or a prefix tree.

The cuts are laid out one after another, each contributing only what it does not share with the
cut before it. A cut that extends the one before continues it; one that shares a prefix of
``l`` tokens and then differs *branches*: its part starts with a copy of its last shared token
(position ``l - 1``), because the token after a branch point must be predicted from it and the
shared token in the trunk already predicts the other branch's. Each cut's supervised tokens are
labelled where the token's prediction sees exactly that cut's context: a token's loss then equals
the cut's own, and a token several cuts supervise carries the sum of their weights, so the sum of
weighted token losses over the sample equals the sum over the cuts.

A chain is one causal sequence. A tree is served with ``position_ids`` (a branch continues its
parent's positions) and ``segments``: ``[first token, tokens, parent segment]`` in token order,
where a token attends to the tokens of its own segment before it and to its ancestor segments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import StaleStoreError
from ..render import IGNORE


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading ids ``a`` and ``b`` share."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    differ = np.flatnonzero(np.asarray(a[:limit]) != np.asarray(b[:limit]))
    return int(differ[0])


def merged_sample(cuts: list[dict[str, Any]], *, trees: bool) -> dict[str, Any]:
    """The sample that trains ``cuts`` (served dicts of one row's cuts, in order) at once: a chain,
    or (``trees``) a prefix tree where a cut is not a prefix of the next. Raises StaleStoreError
    where the stored tokens no longer merge as the plan found."""
    ids: list[int] = []
    positions: list[int] = []
    segments: list[list[int]] = []  # [first token, tokens, parent], parents by index into this list
    path = np.zeros(0, dtype=np.int64)  # token of each position of the last cut's path
    holder = np.zeros(0, dtype=np.int64)  # token whose label trains each position of that path
    supervised: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    before: list[int] = []
    tail = 0  # the segment holding the last token so far
    for number, cut in enumerate(cuts):
        cut_ids = cut["input_ids"]
        shared = common_prefix(before, cut_ids) if number else 0
        extends = shared == len(before)
        if not extends and not (trees and shared):
            how = "shares no token with" if trees else "is not an extension of"
            raise StaleStoreError(f"cut {number} of a merged conversation {how} the cut before it any more; run "
                                  "dataidx pack again")
        attach = shared if extends else shared - 1
        start = len(ids)
        ids += cut_ids[attach:]
        positions += range(attach, len(cut_ids))
        own = np.arange(start, len(ids), dtype=np.int64)
        new_holder = np.concatenate([holder[:attach], own])
        if number == 0:
            segments.append([start, len(own), -1])
        elif extends:
            segments[tail][1] += len(own)  # the cut before ends the tokens so far: continue its segment
        else:
            new_holder[attach] = holder[attach]  # the copy's own label would be predicted from the wrong token
            # A branch that shares only the first token restarts from it: a root of its own.
            segments.append([start, len(own), _split_after(segments, int(path[attach - 1])) if attach else -1])
            tail = len(segments) - 1
        path, holder, before = np.concatenate([path[:attach], own]), new_holder, cut_ids
        labels = np.asarray(cut["labels"], dtype=np.int64)
        trained = np.flatnonzero(labels != IGNORE)
        weights = np.asarray(cut["loss_weights"], dtype=np.float64)
        supervised.append((new_holder[trained], labels[trained], weights[trained]))
    labels_out = np.full(len(ids), IGNORE, dtype=np.int64)
    weights_out = np.zeros(len(ids), dtype=np.float64)
    for at, labels, weights in supervised:
        labels_out[at] = labels
        np.add.at(weights_out, at, weights)
    sample: dict[str, Any] = {"_dataset_name": cuts[0].get("_dataset_name"), "input_ids": ids,
                              "labels": labels_out.tolist(), "loss_weights": weights_out.tolist(),
                              "attention_mask": [1] * len(ids)}
    if cuts[0].get("extra_info") is not None:  # a row's cuts share its sample's
        sample["extra_info"] = cuts[0]["extra_info"]
    if trees:
        order = sorted(range(len(segments)), key=lambda k: segments[k][0])
        renumbered = {old: new for new, old in enumerate(order)}
        sample["position_ids"] = positions
        sample["segments"] = [[segments[k][0], segments[k][1], renumbered.get(segments[k][2], -1)] for k in order]
    return sample


def _split_after(segments: list[list[int]], token: int) -> int:
    """The index of the segment that ends at ``token``: the segment holding it is split in two when
    it goes on past it (the rest becomes its child and inherits its children)."""
    number = next(k for k, (first, count, _) in enumerate(segments) if first <= token < first + count)
    first, count, _ = segments[number]
    if token == first + count - 1:
        return number
    rest = len(segments)
    for segment in segments:
        if segment[2] == number:
            segment[2] = rest
    segments[number][1] = token - first + 1
    segments.append([token + 1, first + count - token - 1, number])
    return number

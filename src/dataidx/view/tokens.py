"""Entries as the model sees them: one ``<span>`` per token, supervised tokens highlighted.

Each span carries its token id, label and loss weight as data attributes, which the page's
tooltip shows on hover; special tokens get a class of their own so they stand out, and a
newline inside a token is drawn as ``↵`` before the line break it makes. Characters are drawn
whole across the tokens that share their bytes (:mod:`.glyphs`). An entry that does not train
(too long, nothing supervised, failed to render) is drawn grey: no token of it is learnt from.
"""

from __future__ import annotations

import html
import random
from collections import defaultdict
from typing import Any

from ..read import StoreReader
from ..render import IGNORE, render_positions
from ..store import Specs
from .glyphs import token_texts

#: Characters of a message shown in a report without a render spec; the rest is counted.
MESSAGE_CHARACTERS = 2_000


def sampled_positions(epochs: list[tuple[int, int]], count: int, seed: int) -> list[tuple[int, int]]:
    """``count`` distinct ``(epoch, position)`` pairs of the epochs ``(epoch, entries)`` given, in
    order, chosen by ``seed`` among all their positions together."""
    total = sum(entries for _, entries in epochs)
    chosen = sorted(random.Random(seed).sample(range(total), min(count, total)))
    picked, passed = [], 0
    for epoch, entries in epochs:
        picked += [(epoch, index - passed) for index in chosen if passed <= index < passed + entries]
        passed += entries
    return picked


def _by_epoch(picks: list[tuple[int, int]]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = defaultdict(list)
    for epoch, position in picks:
        grouped[epoch].append(position)
    return grouped


def _where(epoch: int, position: int, epochs: int) -> str:
    return f"position {position}" if epochs == 1 else f"epoch {epoch} · position {position}"


def rendered_samples(path: str, mixture: str, *, spec: str, picks: list[tuple[int, int]], epochs: int,
                     trust_remote_code: bool = False) -> list[str]:
    """HTML of each ``(epoch, position)`` rendered under ``spec``: its status and tokens."""
    blocks = []
    for epoch, positions in _by_epoch(picks).items():
        renderer, rendered = render_positions(path, mixture, spec, positions, verify=False, epoch=epoch,
                                              trust_remote_code=trust_remote_code)
        for position, (dataset, row, cut, one) in zip(positions, rendered):
            trains = one.status in Specs.TRAINING_STATUSES
            heading = (f"{_where(epoch, position, epochs)} · {html.escape(dataset)} row {row}"
                       f"{'' if cut is None else f' cut {cut}'} · <b>{one.status}</b>"
                       f"{'' if not one.detail else ' · ' + html.escape(one.detail)}"
                       f"{'' if trains else ' · does not train: drawn grey'}")
            sides = one.sides or {"": one}
            body = "".join((f"<div class='side'>{name}</div>" if name else "")
                           + _tokens(renderer.tokenizer, side, special=renderer.controls.ids, trains=trains,
                                     most=renderer.cutoff)
                           for name, side in sides.items())
            blocks.append(f"<div class='sample{'' if trains else ' untrained'}' data-status='{one.status}'>"
                          f"<div class='heading'>{heading}</div>{body}</div>")
    return blocks


def converted_samples(path: str, mixture: str, picks: list[tuple[int, int]], epochs: int) -> list[str]:
    """HTML of each ``(epoch, position)``'s converted messages, for a report without a render spec."""
    blocks = []
    for epoch, positions in _by_epoch(picks).items():
        with StoreReader(path, mixture, verify=False, epoch=epoch) as reader:
            samples = reader.get_many(positions)
        for position, sample in zip(positions, samples):
            lines = []
            for message in sample.get("messages") or sample.get("chosen_messages") or []:
                text = "".join(str(block.get("value")) for block in message.get("content") or [])
                lines.append(f"<div class='message'><b>{html.escape(_cut(str(message.get('role')), 40))}</b> "
                             f"{html.escape(_cut(text, MESSAGE_CHARACTERS))}</div>")
            blocks.append(f"<div class='sample'><div class='heading'>{_where(epoch, position, epochs)} · "
                          f"{html.escape(sample.get('_dataset_name', ''))}</div>{''.join(lines)}</div>")
    return blocks


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else f"{text[:most]}… ({len(text) - most:,} more characters not shown)"


def _tokens(tokenizer: Any, rendered: Any, *, special: dict[int, str], trains: bool, most: int) -> str:
    """The spans of at most ``most`` tokens (the cutoff: what could train), then how many more."""
    spans = []
    ids = list(rendered.input_ids[:most])
    # A few tokens past the last shown, so a character whose bytes go on past it is still whole.
    texts = token_texts(tokenizer, list(rendered.input_ids[:most + 8]))[:most]
    for token_id, label, weight, text in zip(ids, rendered.labels, rendered.loss_weights, texts):
        classes = "tok" + (" sup" if trains and label != IGNORE else "") + (" special" if token_id in special else "")
        if text is None:  # the rest of a character drawn in an earlier box
            classes, shown = classes + " cont", ""
        else:
            shown = html.escape(text).replace("\n", "↵<br>") or "∅"
        spans.append(f"<span class='{classes}' data-id='{token_id}' data-label='{label}' "
                     f"data-weight='{weight:g}'>{shown}</span>")
    hidden = len(rendered.input_ids) - len(ids)
    more = f"<div class='more'>{hidden:,} more tokens not shown (past the cutoff)</div>" if hidden > 0 else ""
    return f"<div class='tokens'>{''.join(spans)}</div>{more}"

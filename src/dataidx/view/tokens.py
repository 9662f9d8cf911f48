"""Entries as the model sees them: one ``<span>`` per token, supervised tokens highlighted.

Each span carries its token id, label and loss weight as data attributes, which the page's
tooltip shows on hover; special tokens get a class of their own so they stand out, and a
newline inside a token is drawn as ``↵`` before the line break it makes.
"""

from __future__ import annotations

import html
import random
from typing import Any

from ..read import StoreReader
from ..render import IGNORE, render_positions


def sampled_positions(entries: int, count: int, seed: int) -> list[int]:
    """``count`` distinct positions of a mixture of ``entries``, in order, chosen by ``seed``."""
    return sorted(random.Random(seed).sample(range(entries), min(count, entries)))


def rendered_samples(path: str, mixture: str, spec: str, positions: list[int]) -> list[str]:
    """HTML of each position rendered under ``spec``: its status and tokens."""
    renderer, rendered = render_positions(path, mixture, spec, positions, verify=False)
    blocks = []
    for position, (dataset, row, cut, one) in zip(positions, rendered):
        heading = (f"position {position} · {html.escape(dataset)} row {row}"
                   f"{'' if cut is None else f' cut {cut}'} · <b>{one.status}</b>"
                   f"{'' if not one.detail else ' · ' + html.escape(one.detail)}")
        sides = one.sides or {"": one}
        body = "".join(
            (f"<div class='side'>{name}</div>" if name else "") + _tokens(renderer.tokenizer, side, renderer.controls.ids)
            for name, side in sides.items()
        )
        blocks.append(f"<div class='sample'><div class='heading'>{heading}</div>{body}</div>")
    return blocks


def converted_samples(path: str, mixture: str, positions: list[int]) -> list[str]:
    """HTML of each position's converted messages, for a report without a render spec."""
    reader = StoreReader(path, mixture, verify=False)
    blocks = []
    for position, sample in zip(positions, reader.get_many(positions)):
        lines = []
        for message in sample.get("messages") or sample.get("chosen_messages") or []:
            text = "".join(str(block.get("value")) for block in message.get("content") or [])
            lines.append(f"<div class='message'><b>{html.escape(str(message.get('role')))}</b> {html.escape(text)}</div>")
        blocks.append(f"<div class='sample'><div class='heading'>position {position} · "
                      f"{html.escape(sample['_dataset_name'])}</div>{''.join(lines)}</div>")
    return blocks


def _tokens(tokenizer: Any, rendered: Any, special: dict[int, str]) -> str:
    spans = []
    for token_id, label, weight in zip(rendered.input_ids, rendered.labels, rendered.loss_weights):
        text = tokenizer.decode([token_id])
        shown = html.escape(text).replace("\n", "↵<br>") or "∅"
        classes = "tok" + (" sup" if label != IGNORE else "") + (" special" if token_id in special else "")
        spans.append(f"<span class='{classes}' data-id='{token_id}' data-label='{label}' "
                     f"data-weight='{weight:g}'>{shown}</span>")
    return f"<div class='tokens'>{''.join(spans)}</div>"

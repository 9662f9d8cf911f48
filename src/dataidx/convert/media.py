"""Split ``<image>``/``<video>``/``<audio>`` placeholders into typed content blocks.

A row's ``images``/``videos``/``audios`` columns (a string or a list) are consumed in document
order by the placeholders of its messages; any mismatch between placeholders and files is an
error, because a silently dropped image misaligns every later one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidRow, shown
from .expansion import MESSAGE_LISTS, kind_of
from .samples import Content

MEDIA_COLUMNS = {"image": "images", "video": "videos", "audio": "audios"}
#: The content block types that name a media file.
MEDIA_BLOCKS = ("image_url", "video_url", "audio_url")
_MEDIA_COLUMN_NAMES = frozenset(MEDIA_COLUMNS.values())
_PLACEHOLDER = re.compile(r"<(image|video|audio)>")


class MediaMismatch(ValueError):
    """Placeholders and media files of a row do not pair up one to one."""


def text_blocks(media: MediaSplitter | None, text: str) -> list[Content]:
    """Content blocks of one message's text; plain text skips the splitter (the hot path)."""
    if media is None and "<" not in text:
        return [{"type": "text", "value": text}]
    return (media or MediaSplitter({})).blocks(text)


def media_lists(row: dict[str, Any]) -> dict[str, list[str]]:
    """The row's media files per kind, as lists (a bare string is one file); InvalidRow naming the
    column when it holds anything but file paths."""
    found: dict[str, list[str]] = {}
    for kind, column in MEDIA_COLUMNS.items():
        value = row.get(column)
        if value is None:
            continue
        files = [value] if isinstance(value, str) else value
        if not isinstance(files, list) or not all(isinstance(path, str) for path in files):
            raise InvalidRow(_not_paths(column, value))
        found[kind] = files
    return found


def media_blocks(sample: Mapping[str, Any]) -> list[tuple[int, str, Any]]:
    """``(message, type, value)`` of every media block of a sample, in order: ``message`` counts a
    conversation's messages, or a pair's chosen then rejected messages as one list (a cut entry
    trains the media of messages below its cut; a pair's one entry, all of them)."""
    found: list[tuple[int, str, Any]] = []
    number = 0
    for key in MESSAGE_LISTS:
        messages = sample.get(key)
        if not isinstance(messages, list):
            continue
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                found += [(number, block["type"], block.get("value")) for block in content
                          if isinstance(block, dict) and block.get("type") in MEDIA_BLOCKS]
            number += 1
    return found


def _not_paths(column: str, value: Any) -> str:
    """Why a media column's value is not file paths (a dict's keys were taken as files, a number
    failed as "'int' object is not iterable"), and, for a datasets Image or Video feature's
    ``{bytes, path}``, what dataidx takes instead."""
    where, what = f"column '{column}'", value
    if isinstance(value, list):
        number, what = next((n, item) for n, item in enumerate(value) if not isinstance(item, str))
        where += f" item {number}"
    described = "null" if what is None else f"{kind_of(what)} ({shown(what)})"
    problem = f"{where} is {described}, not a file path (a string)"
    if isinstance(what, dict) and set(what) <= {"bytes", "path"}:
        problem += "; media stored as data (a datasets Image or Video feature) is not read: give file paths"
    return problem


class MediaSplitter:
    """Hands out a row's media files to placeholders, one text at a time, then checks the count."""

    def __init__(self, media: dict[str, list[str]]) -> None:
        self._media = media
        self._used = {kind: 0 for kind in MEDIA_COLUMNS}

    @classmethod
    def for_row(cls, row: dict[str, Any]) -> MediaSplitter | None:
        """A splitter for a row with media columns; None for the common row without any."""
        if _MEDIA_COLUMN_NAMES.isdisjoint(row):  # the hot path: no media column at all
            return None
        media = media_lists(row)
        return cls(media) if media else None

    def blocks(self, text: str) -> list[Content]:
        """Content blocks for ``text``: text pieces and media blocks in document order."""
        blocks: list[Content] = []
        last = 0
        for match in _PLACEHOLDER.finditer(text):
            kind = match.group(1)
            files = self._media.get(kind, [])
            index = self._used[kind]
            if index >= len(files):
                raise MediaMismatch(
                    f"more <{kind}> placeholders than files in column '{MEDIA_COLUMNS[kind]}' ({len(files)})"
                )
            if match.start() > last:
                blocks.append({"type": "text", "value": text[last : match.start()]})
            blocks.append({"type": f"{kind}_url", "value": files[index]})
            self._used[kind] = index + 1
            last = match.end()
        if last < len(text) or not blocks:
            blocks.append({"type": "text", "value": text[last:]})
        return blocks

    def finish(self) -> None:
        """Raise if some media files were never referenced by a placeholder."""
        for kind, files in self._media.items():
            if self._used[kind] < len(files):
                raise MediaMismatch(
                    f"{len(files)} files in column '{MEDIA_COLUMNS[kind]}' but only "
                    f"{self._used[kind]} <{kind}> placeholders"
                )

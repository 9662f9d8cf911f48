"""The media files a build's rows name: where each path as written resolves, and each distinct
file's size, mtime, content digest and header, found once per build however many rows use it.

A relative path is looked for under the dataset's ``media_dir`` when it has one (LLaMA-Factory
v0's key), else under the working directory (v1 hands the string to its processor as written)
and then the data file's folder (v0's default ``media_dir``, its ``dataset_dir``); the first
place holding the file is recorded. An absolute path is taken as it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .fingerprints import content_hash
from .media_headers import MediaHeader, MediaUnreadable, read_header

#: A media block's type -> the kind of file it names.
KINDS = {"image_url": "image", "video_url": "video", "audio_url": "audio"}


class MissingMedia(ValueError):
    """A media file is missing, unreadable, unsupported or over a bound; the message, one line,
    names the file (the caller names dataset and row)."""


@dataclass(frozen=True)
class MediaFile:
    """One distinct media file, as a build records it (``id`` numbers them from 1 in build order)."""

    id: int
    kind: str
    path: str
    bytes: int
    mtime_ns: int
    xxh3_128: str
    header: MediaHeader


def media_places(media_dir: str | None, data_path: str | None) -> tuple[str, ...]:
    """The folders a dataset's relative media paths are looked for in, in order."""
    if media_dir is not None:
        return (media_dir,)
    places = [os.getcwd()]
    if data_path is not None and os.path.exists(data_path):
        folder = data_path if os.path.isdir(data_path) else os.path.dirname(data_path)
        if folder not in places:
            places.append(folder)
    return tuple(places)


class MediaCatalogue:
    """Every distinct media file of one build, by resolved path: each is stat'ed, hashed and its
    header read the first time a row names it, never again."""

    def __init__(self) -> None:
        self.files: dict[str, MediaFile] = {}
        # A path as written, looked for in the same places, resolves the same way: a million rows
        # naming a few images pay a dict lookup each, not a realpath and a stat per place.
        self._found: dict[tuple[str, tuple[str, ...]], MediaFile] = {}

    def find(self, written: str, kind: str, places: tuple[str, ...]) -> MediaFile:
        """The record of the file a row names as ``written``; MissingMedia saying why not."""
        found = self._found.get((written, places))
        if found is None:
            found = self._found[(written, places)] = self._resolve(written, kind, places)
        if found.kind != kind:
            raise MissingMedia(f"{kind} '{written}' ({found.path}) is named as a {found.kind} by an earlier row")
        return found

    def _resolve(self, written: str, kind: str, places: tuple[str, ...]) -> MediaFile:
        if "://" in written or written.startswith("data:"):
            raise MissingMedia(f"{kind} '{written[:80]}' is a URL or inline data, not a file: dataidx records local "
                               "media files only (download it and give its path)")
        candidates = ([written] if os.path.isabs(written)
                      else [os.path.normpath(os.path.join(place, written)) for place in places])
        path = next((candidate for candidate in candidates if os.path.isfile(candidate)), None)
        if path is None:
            looked = ", ".join(candidates)
            hint = "" if os.path.isabs(written) else "; give the dataset a media_dir (the folder its paths start from)"
            raise MissingMedia(f"{kind} '{written}' is missing (looked for {looked}){hint}")
        path = os.path.realpath(path)
        found = self.files.get(path)
        if found is None:
            found = self.files[path] = _record(len(self.files) + 1, path, kind, written)
        return found


def _record(id_: int, path: str, kind: str, written: str) -> MediaFile:
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            header = read_header(handle, stat.st_size, kind)
        digest = content_hash(path)
    except MediaUnreadable as exc:
        raise MissingMedia(f"{kind} '{written}' ({path}): {exc}") from None
    except OSError as exc:
        raise MissingMedia(f"{kind} '{written}' ({path}) cannot be read ({exc.strerror or exc})") from None
    return MediaFile(id_, kind, path, stat.st_size, stat.st_mtime_ns, digest, header)

"""A fetched sample's media files, checked as its sources are: a file whose size or mtime moved
since the build is refused, naming it, instead of serving other pixels than the store recorded.

One indexed read of the row's media and one ``stat`` per file, only for datasets whose rows name
media (asked once per dataset and process); a text dataset pays nothing. A file is looked for at
its recorded place relative to the store first, as a source is: a project folder moved or copied
whole (store, data and media) reads its own media there, and a copy checks its own files.
"""

from __future__ import annotations

import os

from ..errors import StaleStoreError
from ..sources import placed
from ..store import Datasets, Media, StoreHandle


class MediaCheck:
    """The media of one dataset's rows, checked on each fetch."""

    def __init__(self, handle: StoreHandle, dataset_id: int, dataset: str, store: str) -> None:
        self.media, self.dataset_id, self.dataset, self.store = Media(handle), dataset_id, dataset, store
        self.active = self.media.has_media(dataset_id)
        self.folder = Datasets.folder_of(store) if self.active else None

    def check(self, row: int, cut: int | None) -> None:
        """StaleStoreError naming the first of the row's media (below ``cut``) that changed or is gone."""
        if not self.active:
            return
        for message, path, size, mtime_ns, relative in self.media.of_row(self.dataset_id, row):
            if cut is not None and message >= cut:
                continue
            _, problem = media_place(path, relative, self.folder, size, mtime_ns)
            if problem is not None:
                raise StaleStoreError(f"{self.store}: dataset '{self.dataset}' row {row}: {problem}; {REBUILD}")


#: What a reader says to do about a media file that changed or is gone.
REBUILD = "rebuild the store (or open it with verify=False / --no-verify to read it anyway)"


def media_place(path: str, relative: str | None, folder: str | None, size: int, mtime_ns: int
                ) -> tuple[str | None, str | None]:
    """A recorded media file where it is now (None when gone), and what is wrong with it there
    (gone, or its size or mtime moved since the build; None when nothing is)."""
    try:
        place, stat = media_stat(path, relative, folder)
    except OSError:
        return None, f"media file {path} is gone"
    if stat.st_size != size or stat.st_mtime_ns != mtime_ns:
        return place, (f"media file {place} changed since the build ({size} -> {stat.st_size} bytes"
                       + (")" if stat.st_size != size else ", modified)"))
    return place, None


def media_stat(path: str, relative: str | None, folder: str | None) -> tuple[str, os.stat_result]:
    """A recorded media file where it is now and its ``stat``: at its place relative to the store's
    ``folder`` when it is there, else at its recorded path (OSError when at neither). One ``stat``
    for a store that has not moved (both name the same file)."""
    moved = placed({"relative": relative}, folder) if relative is not None else None
    if moved is not None:
        try:
            return moved, os.stat(moved)
        except OSError:
            pass
    return path, os.stat(path)

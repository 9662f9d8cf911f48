"""A build's media: each converted row's media blocks recorded in order, each distinct file read
once (:class:`~dataidx.sources.MediaCatalogue`), and the files stored once every dataset is in.

A row naming a file that is missing, unreadable, unsupported or over a bound fails as a row that
cannot be converted does: one line naming dataset, row and file, or a reject under
``on_error: skip``.
"""

from __future__ import annotations

from sqlalchemy import Connection

from ..convert import Sample, media_blocks
from ..errors import MediaError
from ..sources import KINDS, MediaCatalogue, MediaHeader, MissingMedia, add_places, media_places
from ..spec import DatasetSpec
from ..store import Media

#: One media block of a row: ``(row, ordinal, message, media id, path as written, offset of the
#: row's first entry in its chunk, the row's entries)``; the writer turns the offset into an id.
Use = tuple[int, int, int, int, str, int, int]


class BuildMedia:
    """The media files of one build and the ids rows name them by."""

    def __init__(self) -> None:
        self.catalogue = MediaCatalogue()
        self.used: set[int] = set()

    def places(self, dataset: DatasetSpec) -> tuple[str, ...]:
        """Where ``dataset``'s relative media paths are looked for, in order."""
        return media_places(dataset.media_dir, dataset.path if dataset.source == "local" else None)

    def row_uses(self, sample: Sample, *, dataset: str, row: int, places: tuple[str, ...], offset: int,
                 entries: int) -> list[Use]:
        """The media of one converted row, in order; MediaError naming dataset, row and file."""
        uses: list[Use] = []
        for ordinal, (message, type_, written) in enumerate(media_blocks(sample)):
            if not isinstance(written, str) or not written:
                raise MediaError(dataset, row, f"a {type_} block holds {written!r}, not a file path")
            try:
                found = self.catalogue.find(written, KINDS[type_], places)
            except MissingMedia as exc:
                raise MediaError(dataset, row, str(exc)) from None
            uses.append((row, ordinal, message, found.id, written, offset, entries))
        return uses

    def keep(self, uses: list[Use]) -> None:
        """Mark the files of a row that was kept (a rejected row's files are not stored)."""
        self.used.update(use[3] for use in uses)

    def write(self, connection: Connection, folder: str | None) -> int:
        """Store every file a kept row names, each with its place relative to the store's
        ``folder`` (None: a store in PostgreSQL); how many."""
        kept = [found for found in self.catalogue.files.values() if found.id in self.used]
        places = add_places([{"path": found.path} for found in kept], folder)
        files = [(found.id, found.kind, found.path, found.bytes, found.mtime_ns, found.xxh3_128, *_fields(found.header),
                  place.get("relative")) for found, place in zip(kept, places)]
        Media(connection).add_files(files)
        return len(files)


def _fields(header: MediaHeader) -> tuple[object, ...]:
    """A header's values in ``media_files``' column order (``dataclasses.astuple`` deep-copies: 46 us a file)."""
    return (header.format, header.width, header.height, header.frames, header.fps, header.duration, header.samples,
            header.rate, header.channels)

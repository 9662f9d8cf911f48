"""What a store keeps of the media its rows name, behind one object: every distinct file a build
read (kind, resolved path, size, mtime, content digest, header) and each row's media blocks in
order, so that an entry (a row's first ``cut`` messages) knows its media and a changed file is
refused on read, as a changed source is.

Reads are templates run through a handle or a writer's working copy: no SQLAlchemy, no NumPy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..sqlite.working_copy import Access, access, writable

#: ``media_files``' columns, in the order :meth:`Media.add_files` takes each file's values.
FILE_COLUMNS = ("id", "kind", "path", "bytes", "mtime_ns", "xxh3_128", "format", "width", "height", "frames", "fps",
                "duration", "samples", "rate", "channels", "relative")
_ROW_COLUMNS = ("dataset_id", "row", "ordinal", "message", "media_id", "written", "first_entry", "entries")
_PER_DATASET = ("SELECT used.dataset_id, count(*), sum(f.bytes) FROM (SELECT DISTINCT dataset_id, media_id "
                "FROM row_media) AS used JOIN media_files AS f ON f.id = used.media_id GROUP BY used.dataset_id")
#: Per dataset, the base entries holding media under a spec (:meth:`Media.under_spec`): each entry's
#: blocks and placeholder tokens summed first, then joined to its lengths by id.
_UNDER_SPEC = """
SELECT d.name, count(*), sum(x.blocks), sum(CASE WHEN r.status IN ({trains}) THEN 1 ELSE 0 END),
       sum(CASE WHEN r.status IN ({trains}) THEN x.tokens ELSE 0 END),
       sum(CASE WHEN r.status = 'truncated' THEN 1 ELSE 0 END)
FROM (SELECT e.id AS entry_id, m.dataset_id AS dataset_id, count(*) AS blocks, sum(coalesce(t.tokens, 0)) AS tokens
      FROM row_media AS m
      JOIN base_entries AS e ON e.id BETWEEN m.first_entry AND m.first_entry + m.entries - 1
        AND (e.cut IS NULL OR m.message < e.cut)
      LEFT JOIN media_renders AS t ON t.spec_id = {mark} AND t.media_id = m.media_id
      GROUP BY e.id, m.dataset_id) AS x
JOIN entry_renders AS r ON r.spec_id = {mark} AND r.entry_id = x.entry_id
JOIN datasets AS d ON d.id = x.dataset_id
GROUP BY d.position, d.name ORDER BY d.position
"""


class RowFile(NamedTuple):
    """A media block of a row and its file as the build recorded it: what rendering and serving
    an entry's media read (its size to count tokens, its place to read pixels)."""

    message: int
    media_id: int
    kind: str
    path: str
    relative: str | None
    width: int | None
    height: int | None
    bytes: int
    mtime_ns: int
    samples: int | None
    rate: int | None


class SpecMedia(NamedTuple):
    """A dataset's base entries holding media, under one render spec (:meth:`Media.under_spec`):
    ``media_tokens`` sums the placeholder tokens of the images of those that train, as the spec's
    processor counts them before truncation."""

    dataset: str
    entries: int
    blocks: int
    training: int
    media_tokens: int
    truncated: int


class Media:
    """The media of a store, over a store handle (reads) or a writer's connection (reads and writes).

    Example::

        with open_store("mllm.db") as handle:
            files = Media(handle).files()   # [{"path", "size", "mtime_ns", "xxh3_128", "kind"}, ...]
    """

    #: A fetch's media of one row, in order: ``(message, path, bytes, mtime_ns, relative)``; only
    #: datasets :meth:`has_media` run it, one indexed range read of ``row_media``.
    FETCH_ROW = ("SELECT m.message, f.path, f.bytes, f.mtime_ns, f.relative FROM row_media AS m JOIN media_files AS f "
                 "ON f.id = m.media_id WHERE m.dataset_id = {mark} AND m.row = {mark} ORDER BY m.ordinal")

    #: A row's media with their files, in order (:class:`RowFile`).
    ROW_FILES = ("SELECT m.message, f.id, f.kind, f.path, f.relative, f.width, f.height, f.bytes, f.mtime_ns, "
                 "f.samples, f.rate "
                 "FROM row_media AS m "
                 "JOIN media_files AS f ON f.id = m.media_id WHERE m.dataset_id = {mark} AND m.row = {mark} "
                 "ORDER BY m.ordinal")
    RowFile = RowFile
    SpecMedia = SpecMedia

    def __init__(self, store: Access) -> None:
        self.store = access(store)
        self._has_media: dict[int, bool] = {}

    def row_files(self, dataset_id: int, row: int) -> list[RowFile]:
        """A row's media blocks with their files, in order."""
        return [RowFile(*found) for found in self.store.all(self.ROW_FILES, dataset_id, row)]

    def entry_files(self, dataset_id: int, row: int, cut: int | None = None) -> list[RowFile]:
        """An entry's media files, in order (its messages below ``cut``): one indexed read, and
        none for a dataset whose rows name no media (asked once per object and dataset)."""
        if dataset_id not in self._has_media:
            self._has_media[dataset_id] = self.has_media(dataset_id)
        if not self._has_media[dataset_id]:
            return []
        return [file for file in self.row_files(dataset_id, row) if cut is None or file.message < cut]

    def recorded(self) -> list[RowFile]:
        """Every recorded file (``message`` 0): what a spec counts tokens for and proves."""
        return [RowFile(0, *found) for found in self.store.all(
            "SELECT id, kind, path, relative, width, height, bytes, mtime_ns, samples, rate FROM media_files "
            "ORDER BY id")]

    def has_media(self, dataset_id: int) -> bool:
        """Whether any row of the dataset names a media file (read once per reader and dataset)."""
        return self.store.one("SELECT 1 FROM row_media WHERE dataset_id = {mark} LIMIT 1", dataset_id) is not None

    def of_row(self, dataset_id: int, row: int) -> list[tuple[int, str, int, int, str | None]]:
        """``(message, path, bytes, mtime_ns, relative)`` of a row's media, in order."""
        return [(message, path, size, mtime_ns, relative)
                for message, path, size, mtime_ns, relative in self.store.all(self.FETCH_ROW, dataset_id, row)]

    def files(self) -> list[dict[str, Any]]:
        """Every recorded file as ``{path, size, mtime_ns, xxh3_128, kind}`` (and ``relative`` where
        it has that place, as a source's record has): what ``verify`` rehashes."""
        return [{"path": path, "size": size, "mtime_ns": mtime_ns, "xxh3_128": digest, "kind": kind,
                 **({"relative": relative} if relative is not None else {})}
                for path, size, mtime_ns, digest, kind, relative in self.store.all(
                    "SELECT path, bytes, mtime_ns, xxh3_128, kind, relative FROM media_files ORDER BY id")]

    def per_dataset(self) -> dict[int, tuple[int, int]]:
        """``dataset id -> (distinct files, their bytes)`` for datasets with media (``dataidx info``)."""
        return {dataset: (files, int(size or 0)) for dataset, files, size in self.store.all(_PER_DATASET)}

    def under_spec(self, spec_id: int) -> list[SpecMedia]:
        """Per dataset with media, its entries' media under spec ``spec_id`` (``dataidx report``).
        Here, not over the views: ``entry_media`` names an entry by dataset, row and a cut that may
        be NULL, which no index joins to ``entry_lengths``; by entry id each is one key lookup."""
        return [SpecMedia(str(name), *(int(value or 0) for value in counts))
                for name, *counts in self.store.all(_UNDER_SPEC, spec_id, spec_id)]

    def add_files(self, files: Iterable[Sequence[Any]]) -> None:
        """Store distinct media files, each its values of :data:`FILE_COLUMNS` in order."""
        writable(self.store).insert_many(
            f"INSERT INTO media_files ({', '.join(FILE_COLUMNS)}) VALUES ({', '.join(['{mark}'] * len(FILE_COLUMNS))})",
            files)

    def add_rows(self, dataset_id: int, uses: Iterable[tuple[int, int, int, int, str, int, int]]) -> None:
        """A dataset's rows' media, each ``(row, ordinal, message, media id, path as written, the
        row's first base entry, its entries)``."""
        writable(self.store).insert_many(
            f"INSERT INTO row_media ({', '.join(_ROW_COLUMNS)}) VALUES ({', '.join(['{mark}'] * len(_ROW_COLUMNS))})",
            [(dataset_id, *use) for use in uses])

"""The tables of media: one row per distinct media file a build read, and one per media block
of a row, in order. Written by :class:`.records.Media` alone; :mod:`dataidx.store.schema`
gathers every noun's tables."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


class MediaFile(Base):
    """A distinct media file, by resolved path: its size, mtime and content digest when the build
    read it, and what its header says (NULL where a field does not apply to its kind)."""

    __tablename__ = "media_files"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    kind: Mapped[str] = mapped_column(String, nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    bytes: Mapped[int] = mapped_column(INT, nullable=False)
    mtime_ns: Mapped[int] = mapped_column(INT, nullable=False)
    xxh3_128: Mapped[str] = mapped_column(String(32), nullable=False)
    format: Mapped[str] = mapped_column(String, nullable=False)
    width: Mapped[int | None] = mapped_column(INT, nullable=True)
    height: Mapped[int | None] = mapped_column(INT, nullable=True)
    frames: Mapped[int | None] = mapped_column(INT, nullable=True)
    fps: Mapped[float | None] = mapped_column(Float, nullable=True)
    duration: Mapped[float | None] = mapped_column(Float, nullable=True)
    samples: Mapped[int | None] = mapped_column(INT, nullable=True)
    rate: Mapped[int | None] = mapped_column(INT, nullable=True)
    channels: Mapped[int | None] = mapped_column(INT, nullable=True)
    #: its place relative to the store's folder (links resolved), read there first: a store moved
    #: with its project folder reads its own copy, as its sources are read (NULL: no such place)
    relative: Mapped[str | None] = mapped_column(Text, nullable=True)


class RowMedia(Base):
    """A media block of a dataset's row: its place in the row (``ordinal``), the message holding
    it (a pair's chosen then rejected messages counted as one list), the file and the path as the
    row wrote it."""

    __tablename__ = "row_media"
    __table_args__ = {"sqlite_with_rowid": False}
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    row: Mapped[int] = mapped_column(INT, primary_key=True)
    ordinal: Mapped[int] = mapped_column(INT, primary_key=True)
    message: Mapped[int] = mapped_column(INT, nullable=False)
    media_id: Mapped[int] = mapped_column(INT, ForeignKey("media_files.id"), nullable=False, index=True)
    written: Mapped[str] = mapped_column(Text, nullable=False)
    #: the row's base entries are ``first_entry .. first_entry + entries - 1`` (consecutive, as the
    #: build writes them), so an entry's media is a range read of the primary key
    first_entry: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)

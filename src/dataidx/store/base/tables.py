"""The tables of the base index: the build's provenance, its datasets, their base entries, the
rows it left out, the rows counted by turns and the digests of entries another shares. Written
by :class:`.records.Datasets` alone, and read through it but where another noun's SQL joins them
(a mixture's composition, a spec's causes, the views); :mod:`dataidx.store.schema` gathers every
noun's tables."""

from __future__ import annotations

from sqlalchemy import JSON, Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


class Build(Base):
    """Provenance of the build that made the store: config text and hash, version, timing."""

    __tablename__ = "builds"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    config_origin: Mapped[str] = mapped_column(Text, nullable=False)
    config_text: Mapped[str] = mapped_column(Text, nullable=False)
    config_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    dataidx_version: Mapped[str] = mapped_column(String, nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)


class Dataset(Base):
    """One dataset of the config: its source, converter, counts, and what fetching needs."""

    __tablename__ = "datasets"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    position: Mapped[int] = mapped_column(INT, nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    source: Mapped[str] = mapped_column(String, nullable=False)
    loader_version: Mapped[str] = mapped_column(String, nullable=False)
    split: Mapped[str] = mapped_column(String, nullable=False)
    converter: Mapped[str] = mapped_column(String, nullable=False)
    converter_version: Mapped[str] = mapped_column(String, nullable=False)
    info: Mapped[dict] = mapped_column(JSON, nullable=False)
    rows: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    first_entry: Mapped[int] = mapped_column(INT, nullable=False)
    drops: Mapped[int] = mapped_column(INT, nullable=False)
    files: Mapped[list] = mapped_column(JSON, nullable=False)
    arrow_files: Mapped[list | None] = mapped_column(JSON, nullable=True)
    rejected: Mapped[int] = mapped_column(INT, nullable=False, server_default="0")
    on_error: Mapped[str] = mapped_column(String, nullable=False, server_default="raise")
    #: rows with no supervised turn and no preference pair; NULL in stores built before 0008
    empty_rows: Mapped[int | None] = mapped_column(INT, nullable=True)


class RejectedRow(Base):
    """A source row the build left out under ``on_error: skip``, and why."""

    __tablename__ = "rejected_rows"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), nullable=False)
    row: Mapped[int] = mapped_column(INT, nullable=False)
    reason: Mapped[str] = mapped_column(Text, nullable=False)


class BaseEntry(Base):
    """The base index: one row per (dataset, row, cut), in dataset then row order."""

    __tablename__ = "base_entries"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), nullable=False)
    row: Mapped[int] = mapped_column(INT, nullable=False)
    cut: Mapped[int | None] = mapped_column(INT, nullable=True)


class DatasetTurns(Base):
    """How many rows of a dataset have ``turns`` entries (supervised turns): the ``turns`` view
    counted once, at build time."""

    __tablename__ = "dataset_turns"
    __table_args__ = {"sqlite_with_rowid": False}
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    turns: Mapped[int] = mapped_column(INT, primary_key=True)
    rows: Mapped[int] = mapped_column(INT, nullable=False)


class EntryDigest(Base):
    """An entry whose messages, or whose prompt side, another entry shares exactly: the 128-bit
    xxh3 of each as 32 hex digits (:mod:`dataidx.convert.digests`), computed at build. An entry
    no other shares either with is not stored: the views ``exact_duplicates`` and
    ``same_prompts`` group these rows."""

    __tablename__ = "entry_digests"
    __table_args__ = {"sqlite_with_rowid": False}
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)
    messages: Mapped[str] = mapped_column(String, nullable=False)
    #: None for an entry with no prompt side: a document, or no supervised turn
    prompt: Mapped[str | None] = mapped_column(String, nullable=True)

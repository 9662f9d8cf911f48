"""Summaries of each mixture's draw and of each render spec, written when they are, so that the
cookbook's questions about repeats, entries a mixture never uses, statuses and a mixture's tokens
read a few rows instead of every position or entry (the base index's, rows by turns, is in
:mod:`.base.tables`; the rest of the schema in :mod:`.schema`)."""

from __future__ import annotations

from sqlalchemy import ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from .declarative import INT, Base


class MixtureSpan(Base):
    """Base entries ``first_entry ..`` (``entries`` of them, within one dataset) are used by the
    mixture, in some epoch; the entries between its spans never are."""

    __tablename__ = "mixture_spans"
    __table_args__ = {"sqlite_with_rowid": False}
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    first_entry: Mapped[int] = mapped_column(INT, primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)


class RepeatCount(Base):
    """How many rows of a dataset the mixture shows ``times`` times (positions over every epoch,
    all the row's cuts together)."""

    __tablename__ = "repeat_counts"
    __table_args__ = {"sqlite_with_rowid": False}
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    times: Mapped[int] = mapped_column(INT, primary_key=True)
    rows: Mapped[int] = mapped_column(INT, nullable=False)


class RepeatRow(Base):
    """One of the first :data:`REPEAT_ROWS` rows (lowest row numbers) of a ``repeat_counts``
    level: enough to name the rows that repeat most for any ``LIMIT`` up to that many."""

    __tablename__ = "repeat_rows"
    __table_args__ = {"sqlite_with_rowid": False}
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    times: Mapped[int] = mapped_column(INT, primary_key=True)
    row: Mapped[int] = mapped_column(INT, primary_key=True)


class RenderStatus(Base):
    """How many base entries of a dataset have ``status`` under a render spec, and the longest
    (``full_tokens``): the ``entry_lengths`` view grouped once, when the spec is written."""

    __tablename__ = "render_statuses"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    status: Mapped[str] = mapped_column(String, primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    longest: Mapped[int] = mapped_column(INT, nullable=False)


class RenderBlock(Base):
    """The entries that train (``ok``, ``truncated``) among base entries ``block * BLOCK_ENTRIES ..``
    of one dataset under a render spec, and their tokens: a run of a mixture sums its whole
    blocks here and reads only its two ends entry by entry."""

    __tablename__ = "render_blocks"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    block: Mapped[int] = mapped_column(INT, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    supervised_tokens: Mapped[int] = mapped_column(INT, nullable=False)


class LengthChunk(Base):
    """Base entries ``first_entry ..`` (``entries`` of them) under a render spec, their lengths as
    arrays: ``tokens`` and ``supervised_tokens`` hold 4 bytes an entry, little-endian unsigned
    ``length << 1 | trains``, what ``entry_renders`` holds for them. ``pack``, token budgets and
    the rendered engine read a spec's every length: 20M entries are 20 rows here (0.2 s), not 20M
    rows of ``entry_renders`` (10 s). Written with the spec; ``verify`` compares them."""

    __tablename__ = "length_chunks"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    first_entry: Mapped[int] = mapped_column(INT, primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    supervised_tokens: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


#: Base entries per ``length_chunks`` row (a chunk's two arrays: 8 MB).
LENGTH_CHUNK_ENTRIES = 1 << 20

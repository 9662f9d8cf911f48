"""The tables ``dataidx skip`` writes: skip lists of a mixture and their entries (the rest is in
:mod:`.schema`; the functions in :mod:`.skips`)."""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .declarative import INT, Base


class SkipListRow(Base):
    """A named list of entries a mixture's orders leave out, with who, why and what was asked."""

    __tablename__ = "skip_lists"
    __table_args__ = (UniqueConstraint("mixture_id", "name"),)
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), nullable=False)
    name: Mapped[str] = mapped_column(String, nullable=False)
    who: Mapped[str] = mapped_column(String, nullable=False)
    why: Mapped[str] = mapped_column(Text, nullable=False)
    #: what was asked, in words: ``entries demo:3:1, demo:7`` or ``steps 10-12 of epoch 0 (...)``
    request: Mapped[str] = mapped_column(Text, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)


class SkippedEntry(Base):
    """A base entry of a skip list."""

    __tablename__ = "skipped_entries"
    skip_list_id: Mapped[int] = mapped_column(INT, ForeignKey("skip_lists.id"), primary_key=True)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)

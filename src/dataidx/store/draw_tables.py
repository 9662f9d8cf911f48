"""Summaries of the base index, of each mixture's draw and of each render spec, written when
they are, so that the cookbook's questions about turns, repeats, entries a mixture never uses,
statuses and a mixture's tokens read a few rows instead of every position or entry (the rest of
the schema is in :mod:`.schema`)."""

from __future__ import annotations

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from .declarative import INT, Base


class DatasetTurns(Base):
    """How many rows of a dataset have ``turns`` entries (supervised turns): the ``turns`` view
    counted once, at build time."""

    __tablename__ = "dataset_turns"
    __table_args__ = {"sqlite_with_rowid": False}
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    turns: Mapped[int] = mapped_column(INT, primary_key=True)
    rows: Mapped[int] = mapped_column(INT, nullable=False)

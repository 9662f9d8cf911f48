"""The tables of evidence: runs (a named list each), the duplicate entries a near-duplicate run
found and the leaks a decontamination found. Read and written by :class:`.records.Evidence`
alone; :mod:`dataidx.store.schema` gathers every noun's tables."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


class EvidenceRun(Base):
    """One run of ``dataidx dedup`` or ``decontaminate``: a named list of base entries."""

    __tablename__ = "evidence_runs"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    #: ``near_duplicates`` or ``contamination``
    kind: Mapped[str] = mapped_column(String, nullable=False)
    #: what decided it, as JSON: thresholds, n-grams, bands, library versions, eval files and digests
    params: Mapped[str] = mapped_column(Text, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)


class DuplicateEntry(Base):
    """A base entry of a row that duplicates an earlier one: the representative's entry and the
    two rows' Jaccard, verified exactly."""

    __tablename__ = "duplicate_entries"
    __table_args__ = {"sqlite_with_rowid": False}
    run_id: Mapped[int] = mapped_column(INT, ForeignKey("evidence_runs.id"), primary_key=True)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)
    representative: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), nullable=False)
    jaccard: Mapped[float] = mapped_column(Float, nullable=False)


class LeakEntry(Base):
    """A base entry that holds an item of an eval set: the item, its score and the span found."""

    __tablename__ = "leak_entries"
    __table_args__ = {"sqlite_with_rowid": False}
    run_id: Mapped[int] = mapped_column(INT, ForeignKey("evidence_runs.id"), primary_key=True)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)
    eval_set: Mapped[str] = mapped_column(String, primary_key=True)
    item: Mapped[int] = mapped_column(INT, nullable=False)
    score: Mapped[float] = mapped_column(Float, nullable=False)
    span: Mapped[str] = mapped_column(Text, nullable=False)

"""The tables of mixtures: each mixture, its epochs and per-dataset draws, its positions (runs of
consecutive base entries, or one row a position), and the summaries of its draw (spans of the
base entries it uses, rows by the times they are drawn). Read and written by
:class:`.records.Mixtures` and the bulk writers beside it; :mod:`dataidx.store.schema` gathers
every noun's tables.

A mixture's position ``i`` (of epoch ``k``) is global position ``mixture_epochs.start + i``
(``mixtures.start + i`` for a mixture of one epoch): either inside one of its ``mixture_runs``
(consecutive base entries, stored as one row) or the rowid of a ``mixture_entries`` row. Either
way reading it is one primary-key lookup.
"""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


class Mixture(Base):
    """A named, seeded resampling of the base index; its positions start at rowid ``start``."""

    __tablename__ = "mixtures"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    sampling: Mapped[str] = mapped_column(String, nullable=False)
    start: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    config_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    dataidx_version: Mapped[str] = mapped_column(String, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    config_text: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    #: ``start``/``entries`` cover every epoch; ``mixture_epochs`` holds each epoch's stretch.
    epochs: Mapped[int] = mapped_column(INT, nullable=False, server_default="1")
    #: the render spec (name and fingerprint when drawn) whose lengths the token budgets used
    spec: Mapped[str | None] = mapped_column(String, nullable=True)
    spec_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: the evidence lists it was drawn without (``dataidx mix --exclude``), a JSON array; NULL: none
    excludes: Mapped[str | None] = mapped_column(Text, nullable=True)


class MixtureEpoch(Base):
    """Epoch ``epoch`` of a mixture: its own seed and its stretch of positions, ``start ..``."""

    __tablename__ = "mixture_epochs"
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    epoch: Mapped[int] = mapped_column(INT, primary_key=True)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    start: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)


class EpochDataset(Base):
    """One dataset's draw in one epoch: its seed, what came out and, under the mixture's spec,
    the entries that train and their tokens."""

    __tablename__ = "epoch_datasets"
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    epoch: Mapped[int] = mapped_column(INT, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    distinct_entries: Mapped[int] = mapped_column(INT, nullable=False)
    distinct_rows: Mapped[int] = mapped_column(INT, nullable=False)
    max_repeats: Mapped[int] = mapped_column(INT, nullable=False)
    training_entries: Mapped[int | None] = mapped_column(INT, nullable=True)
    tokens: Mapped[int | None] = mapped_column(INT, nullable=True)
    supervised_tokens: Mapped[int | None] = mapped_column(INT, nullable=True)


class MixtureDataset(Base):
    """One dataset's draw in a mixture: the derived seed, what was asked and what came out."""

    __tablename__ = "mixture_datasets"
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    size: Mapped[int | None] = mapped_column(INT, nullable=True)
    weight: Mapped[float | None] = mapped_column(Float, nullable=True)
    base_entries: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    requested: Mapped[int | None] = mapped_column(INT, nullable=True)
    # Counted when the mixture is written, so composition reads a row, not every position.
    distinct_entries: Mapped[int] = mapped_column(INT, nullable=False, server_default="0")
    distinct_rows: Mapped[int] = mapped_column(INT, nullable=False, server_default="0")
    max_repeats: Mapped[int] = mapped_column(INT, nullable=False, server_default="0")
    # The budget asked for (``tokens`` or ``supervised_tokens`` in the config), per epoch.
    token_budget: Mapped[int | None] = mapped_column(INT, nullable=True)
    supervised_token_budget: Mapped[int | None] = mapped_column(INT, nullable=True)


class MixtureRun(Base):
    """Positions ``start .. start + length - 1`` hold entries ``first_entry ..`` in order."""

    __tablename__ = "mixture_runs"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), nullable=False)
    start: Mapped[int] = mapped_column(INT, nullable=False)
    first_entry: Mapped[int] = mapped_column(INT, nullable=False)
    length: Mapped[int] = mapped_column(INT, nullable=False)


class MixtureEntry(Base):
    """Position ``id - mixtures.start`` of a mixture points at one base entry."""

    __tablename__ = "mixture_entries"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), nullable=False)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), nullable=False)


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

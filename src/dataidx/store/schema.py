"""The store's schema: SQLAlchemy 2.0 models and the documented views (revision: :mod:`.connect`).

Alembic migrations in ``migrations/`` create and upgrade this schema; these models are the
single description the code reads and writes through (a test checks the two agree).
A mixture's position ``i`` (of epoch ``k``) is global position ``mixture_epochs.start + i``
(``mixtures.start + i`` for a mixture of one epoch): either inside one of its
``mixture_runs`` (consecutive base entries, stored as one row) or the rowid of a
``mixture_entries`` row. Either way reading it is one primary-key lookup.
"""

from __future__ import annotations

from importlib import resources

from sqlalchemy import Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base.tables import BaseEntry, Build, Dataset, DatasetTurns, RejectedRow
from .declarative import INT, NAMING, Base
from .draw_tables import (
    LENGTH_CHUNK_ENTRIES,
    LengthChunk,
    MixtureSpan,
    RenderBlock,
    RenderStatus,
    RepeatCount,
    RepeatRow,
)
from .orders.tables import OrderItem, OrderTrim, SkipListRow, SkippedEntry, TrainingOrderRow
from .render_tables import (
    AddedTokenUse,
    EntryRender,
    Pack,
    PackedEntry,
    PackingPlanRow,
    PlanEpoch,
    PlanMerge,
    RenderCause,
    RenderSpecRow,
    SpecTokens,
)
from .summary_sql import BLOCK_ENTRIES, REPEAT_ROWS

# The render, pack and draw summary tables are declared apart, and imported above so that every table is in
# Base.metadata (PostgreSQL publishing copies them all) whichever module is imported first.

__all__ = ["AddedTokenUse", "BLOCK_ENTRIES", "Base", "BaseEntry", "Build", "Dataset", "DatasetTurns", "EntryRender",
           "EpochDataset", "INT", "LENGTH_CHUNK_ENTRIES", "LengthChunk", "Mixture", "MixtureDataset", "MixtureEntry",
           "MixtureEpoch", "MixtureRun", "MixtureSpan", "NAMING", "OrderItem", "OrderTrim", "Pack", "PackedEntry",
           "PackingPlanRow", "PlanEpoch", "PlanMerge", "REPEAT_ROWS", "RejectedRow", "RenderBlock", "RenderCause",
           "RenderSpecRow", "RenderStatus", "RepeatCount", "RepeatRow", "SkipListRow", "SkippedEntry", "SpecTokens",
           "TrainingOrderRow", "VIEW_COLUMNS", "schema_script"]


def schema_script() -> str:
    """``schema.sql``: a new store's tables, indexes and views exactly as the migrations make them."""
    return resources.files("dataidx.store").joinpath("schema.sql").read_text()


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


#: The views users may rely on, created by the migrations; their columns are an interface.
VIEW_COLUMNS = {
    "entries": ("mixture", "position", "dataset", "row", "cut", "epoch"),
    "composition": ("mixture", "dataset", "entries", "distinct_rows", "share"),
    "turns": ("dataset", "row", "entries", "last_cut"),
    "repeats": ("mixture", "dataset", "row", "cut", "repeats"),
    "rejects": ("dataset", "row", "reason"),
    "entry_lengths": ("spec", "dataset", "row", "cut", "tokens", "supervised_tokens", "status", "full_tokens", "detail",
                      "cause", "reasoning"),
    "pack_plans": ("plan", "spec", "mixture", "capacity", "seed", "packs", "entries", "fill", "tokens", "left_out"),
    "pack_members": ("plan", "pack", "slot", "position", "tokens", "epoch"),
    "token_composition": ("mixture", "epoch", "dataset", "entries", "tokens", "supervised_tokens", "share_of_tokens"),
    "token_files": ("spec", "file", "folder", "entries", "tokens", "word_bytes", "bytes", "bytes_per_token", "sha256",
                    "created_at"),
    "skips": ("mixture", "skip_list", "dataset", "row", "cut", "who", "why", "request", "created_at"),
    "trimmed": ("order", "mixture", "epoch", "dataset", "row", "cut", "global_batch_size", "seed"),
    "order_steps": ("order", "epoch", "step", "item", "dataset", "row", "cut"),
    "cut_merges": ("plan", "epoch", "outcome", "rows", "entries", "cut_tokens", "tokens"),
}

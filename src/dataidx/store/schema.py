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

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


#: 64-bit in every database: SQLite's INTEGER is, PostgreSQL's integer is not (seeds need 64 bits).
INT = Integer().with_variant(BigInteger(), "postgresql")


def schema_script() -> str:
    """``schema.sql``: a new store's tables, indexes and views exactly as the migrations make them."""
    return resources.files("dataidx.store").joinpath("schema.sql").read_text()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


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


class RenderSpecRow(Base):
    """How entries were rendered: tokenizer fingerprint, template text, cutoff and truncation.

    ``fingerprint`` hashes all of them with the dataidx version, so lengths are reused only for
    exactly the same rendering; ``kept`` counts entries whose status lets them train.
    """

    __tablename__ = "render_specs"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    fingerprint: Mapped[str] = mapped_column(String(64), nullable=False)
    tokenizer: Mapped[str] = mapped_column(Text, nullable=False)
    tokenizer_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    template: Mapped[str] = mapped_column(String, nullable=False)
    template_text: Mapped[str] = mapped_column(Text, nullable=False)
    cutoff: Mapped[int] = mapped_column(INT, nullable=False)
    truncation: Mapped[str] = mapped_column(String, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    kept: Mapped[int] = mapped_column(INT, nullable=False)
    dataidx_version: Mapped[str] = mapped_column(String, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)
    #: the time ``strftime_now`` reads in the template (ISO 8601), fixed when the spec is first
    #: rendered; NULL in specs stored before 0009
    clock: Mapped[str | None] = mapped_column(String, nullable=True)
    #: which tokens data text may not produce as ids: ``special`` (v1's) or ``added`` (every added token)
    escapes: Mapped[str] = mapped_column(String, nullable=False, server_default="special")


class AddedTokenUse(Base):
    """How many entries of a dataset hold, in their data text, an added token that is not special
    (Qwen's ``<tool_call>``, ``<think>``), under one spec: v1 trains them as their ids."""

    __tablename__ = "added_token_uses"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(INT, ForeignKey("datasets.id"), primary_key=True)
    token: Mapped[str] = mapped_column(String, primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)


class EntryRender(Base):
    """One base entry under one spec: token counts after truncation, before it, and a status."""

    __tablename__ = "entry_renders"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    supervised_tokens: Mapped[int] = mapped_column(INT, nullable=False)
    full_tokens: Mapped[int] = mapped_column(INT, nullable=False)
    status: Mapped[str] = mapped_column(String, nullable=False)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


class PackingPlan(Base):
    """Best-fit-decreasing packs of one mixture's kept positions under one spec, seeded order."""

    __tablename__ = "packing_plans"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), nullable=False)
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), nullable=False)
    capacity: Mapped[int] = mapped_column(INT, nullable=False)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    packs: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    fill: Mapped[float] = mapped_column(Float, nullable=False)
    left_out: Mapped[int] = mapped_column(INT, nullable=False)
    dataidx_version: Mapped[str] = mapped_column(String, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)
    #: one plan per epoch of its mixture; ``plan_epochs`` says which packs are whose
    epochs: Mapped[int] = mapped_column(INT, nullable=False, server_default="1")


class PlanEpoch(Base):
    """The packs of one epoch of a plan: ``first_pack .. first_pack + packs - 1``, shuffled with ``seed``."""

    __tablename__ = "plan_epochs"
    plan_id: Mapped[int] = mapped_column(INT, ForeignKey("packing_plans.id"), primary_key=True)
    epoch: Mapped[int] = mapped_column(INT, primary_key=True)
    seed: Mapped[int] = mapped_column(INT, nullable=False)
    first_pack: Mapped[int] = mapped_column(INT, nullable=False)
    packs: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    fill: Mapped[float] = mapped_column(Float, nullable=False)
    left_out: Mapped[int] = mapped_column(INT, nullable=False)


class Pack(Base):
    """Pack ``pack`` of a plan: its members are ``packed_entries`` rowids ``first_member ..``."""

    __tablename__ = "packs"
    __table_args__ = {"sqlite_with_rowid": False}
    plan_id: Mapped[int] = mapped_column(INT, ForeignKey("packing_plans.id"), primary_key=True)
    pack: Mapped[int] = mapped_column(INT, primary_key=True)
    first_member: Mapped[int] = mapped_column(INT, nullable=False)
    members: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)


class PackedEntry(Base):
    """One member of a pack, in slot order: a mixture position and its base entry."""

    __tablename__ = "packed_entries"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    plan_id: Mapped[int] = mapped_column(INT, ForeignKey("packing_plans.id"), nullable=False)
    position: Mapped[int] = mapped_column(INT, nullable=False)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), nullable=False)


#: The views users may rely on, created by the migrations; their columns are an interface.
VIEW_COLUMNS = {
    "entries": ("mixture", "position", "dataset", "row", "cut", "epoch"),
    "composition": ("mixture", "dataset", "entries", "distinct_rows", "share"),
    "turns": ("dataset", "row", "entries", "last_cut"),
    "repeats": ("mixture", "dataset", "row", "cut", "repeats"),
    "rejects": ("dataset", "row", "reason"),
    "entry_lengths": ("spec", "dataset", "row", "cut", "tokens", "supervised_tokens", "status", "full_tokens", "detail"),
    "pack_plans": ("plan", "spec", "mixture", "capacity", "seed", "packs", "entries", "fill", "tokens", "left_out"),
    "pack_members": ("plan", "pack", "slot", "position", "tokens", "epoch"),
    "token_composition": ("mixture", "epoch", "dataset", "entries", "tokens", "supervised_tokens", "share_of_tokens"),
}

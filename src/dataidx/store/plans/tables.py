"""The tables of packing plans (``dataidx pack``): a plan, its epochs, its packs and their members,
and what ``--merge-cuts`` made of its conversations. Read and written by :class:`.records.Plans`
alone; :mod:`dataidx.store.schema` gathers every noun's tables."""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


class PackingPlanRow(Base):
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
    #: ``no``, or how a conversation's cuts were merged into one sequence: ``chains`` or ``trees``
    merge_cuts: Mapped[str] = mapped_column(String, nullable=False, server_default="no")
    #: ``best-fit``, or v1's ``dynamic`` or ``dynamic-padding-free`` (``--strategy``), whose budget is
    #: ``micro_batch_size`` times the spec's cutoff tokens (None for best-fit)
    strategy: Mapped[str] = mapped_column(String, nullable=False, server_default="best-fit")
    micro_batch_size: Mapped[int | None] = mapped_column(INT, nullable=True)
    #: the topology it was made for (``--world-size``, ``--micro-batches``), or None
    world_size: Mapped[int | None] = mapped_column(INT, nullable=True)
    micro_batches: Mapped[int | None] = mapped_column(INT, nullable=True)
    #: ``tokens`` (a seeded shuffle of token-full packs) or ``compute`` (every rank's share of a
    #: step about equal in cost ``cost_a * L + cost_b * L**2`` per sequence)
    balance: Mapped[str] = mapped_column(String, nullable=False, server_default="tokens")
    cost_a: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost_b: Mapped[float | None] = mapped_column(Float, nullable=True)


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
    #: this member and the next are cuts of one conversation trained as one sequence (``--merge-cuts``)
    joined: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())


class PlanMerge(Base):
    """How many conversations of an epoch of a plan ended one way under ``--merge-cuts`` (merged,
    tree, or why their cuts stayed entries), their entries, and tokens forwarded as cuts and as planned."""

    __tablename__ = "plan_merges"
    plan_id: Mapped[int] = mapped_column(INT, ForeignKey("packing_plans.id"), primary_key=True)
    epoch: Mapped[int] = mapped_column(INT, primary_key=True)
    outcome: Mapped[str] = mapped_column(String, primary_key=True)
    rows: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    cut_tokens: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)

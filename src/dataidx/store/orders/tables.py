"""The tables of training orders: skip lists of a mixture and their entries (``dataidx skip``),
recorded orders and what their epochs' tails trim (``dataidx order``). Read and written by
:class:`.records.Orders` alone; :mod:`dataidx.store.schema` gathers every noun's tables."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


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


class TrainingOrderRow(Base):
    """A run's order, recorded by name: what it reads (``mixture``, ``spec`` or ``plan`` ``target``),
    its seed, global batch size, tail rule, whether skip lists apply, and steps per stored epoch."""

    __tablename__ = "training_orders"
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    mixture_id: Mapped[int] = mapped_column(INT, ForeignKey("mixtures.id"), nullable=False)
    reads: Mapped[str] = mapped_column(String, nullable=False)
    target: Mapped[str | None] = mapped_column(String, nullable=True)
    seed: Mapped[int | None] = mapped_column(INT, nullable=True)
    global_batch_size: Mapped[int] = mapped_column(INT, nullable=False)
    tail: Mapped[str] = mapped_column(String, nullable=False)
    skips: Mapped[bool] = mapped_column(Boolean, nullable=False)
    steps: Mapped[Any] = mapped_column(JSON, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)


class OrderTrim(Base):
    """A base entry the tail of an epoch of a recorded order leaves out."""

    __tablename__ = "order_trims"
    order_id: Mapped[int] = mapped_column(INT, ForeignKey("training_orders.id"), primary_key=True)
    epoch: Mapped[int] = mapped_column(INT, primary_key=True)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), primary_key=True)


class OrderItem(Base):
    """An entry of a step of a recorded order (``dataidx order --store-steps``): the step, the item
    the order reads (a mixture position, or a plan's pack) and the base entry it holds."""

    __tablename__ = "order_items"
    __table_args__ = (Index("ix_order_items_step", "order_id", "epoch", "step"),)
    id: Mapped[int] = mapped_column(INT, primary_key=True)
    order_id: Mapped[int] = mapped_column(INT, ForeignKey("training_orders.id"), nullable=False)
    epoch: Mapped[int] = mapped_column(INT, nullable=False)
    step: Mapped[int] = mapped_column(INT, nullable=False)
    item: Mapped[int] = mapped_column(INT, nullable=False)
    entry_id: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), nullable=False)

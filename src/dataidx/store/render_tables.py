"""The tables ``dataidx render`` writes: render specs and their lengths, and the added tokens
found in data (packing plans are in :mod:`.plans.tables`, the rest in :mod:`.schema`)."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .declarative import INT, Base


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


class RenderCause(Base):
    """How many entries of a spec do not train for one cause (``kind`` ``status``), or have one
    reasoning status (``kind`` ``reasoning``), and the first of them: counted once when the spec is
    written, so ``info`` and the report never scan the spec's entries for it."""

    __tablename__ = "render_causes"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String, primary_key=True)
    cause: Mapped[str] = mapped_column(String, primary_key=True)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    example_entry: Mapped[int] = mapped_column(INT, ForeignKey("base_entries.id"), nullable=False)


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
    #: why an entry does not train, in words that group (see migration 0010); NULL when it trains
    cause: Mapped[str | None] = mapped_column(String, nullable=True)
    #: what became of the entry's reasoning: NULL (none), kept, dropped, inline, unclosed,
    #: no_answer or mode_mismatch (see migration 0010)
    reasoning: Mapped[str | None] = mapped_column(String, nullable=True)
    #: where the entry's words start in the spec's token file; NULL when no tokens are stored (0011)
    token_offset: Mapped[int | None] = mapped_column(INT, nullable=True)
    #: a preference pair's chosen side's words (its rejected side follows them)
    side_tokens: Mapped[int | None] = mapped_column(INT, nullable=True)
    #: loss weights as runs (``uint32`` count, ``float64`` weight); NULL: supervised 1, the rest 0
    token_weights: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class SpecTokens(Base):
    """The token file of a spec (``dataidx render --store-tokens``): ``file`` in ``folder`` (NULL:
    ``<store>.tokens`` beside a store file), ``tokens`` words of ``word_bytes`` each, its size and
    sha256, written once and never rewritten in place."""

    __tablename__ = "spec_tokens"
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    file: Mapped[str] = mapped_column(String, nullable=False)
    folder: Mapped[str | None] = mapped_column(Text, nullable=True)
    word_bytes: Mapped[int] = mapped_column(INT, nullable=False)
    entries: Mapped[int] = mapped_column(INT, nullable=False)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    bytes: Mapped[int] = mapped_column(INT, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)

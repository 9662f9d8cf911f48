"""The tables of render specs: each spec (how entries were rendered), every base entry's lengths
and status under it (and where its words lie when tokens are stored), its token file, why
entries do not train, the added tokens found in data, and its summaries (statuses per dataset,
blocks of entries, lengths as arrays). Read and written by :class:`.records.Specs` and the
writers beside it; :mod:`dataidx.store.schema` gathers every noun's tables."""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, LargeBinary, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from ..declarative import INT, Base


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
    #: the tokenizer's class came from Python files in its folder (``--trust-remote-code``, 0017)
    trust_remote_code: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    #: the image processor's settings (JSON) media were rendered with; NULL: a text spec (0019)
    processor: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: what was decoded to prove header counts equal to the processor's (0019)
    media_proof: Mapped[str | None] = mapped_column(Text, nullable=True)


class MediaRender(Base):
    """A media file under a spec: its placeholder tokens and what they come from (an image's grid,
    an audio's feature frames; NULL where it does not apply), as the spec's processor counts them
    (the same file has a count per processor)."""

    __tablename__ = "media_renders"
    __table_args__ = {"sqlite_with_rowid": False}
    spec_id: Mapped[int] = mapped_column(INT, ForeignKey("render_specs.id"), primary_key=True)
    media_id: Mapped[int] = mapped_column(INT, ForeignKey("media_files.id"), primary_key=True)
    tokens: Mapped[int] = mapped_column(INT, nullable=False)
    grid_t: Mapped[int | None] = mapped_column(INT, nullable=True)
    grid_h: Mapped[int | None] = mapped_column(INT, nullable=True)
    grid_w: Mapped[int | None] = mapped_column(INT, nullable=True)
    frames: Mapped[int | None] = mapped_column(INT, nullable=True)


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
    #: the sample's ``extra_info`` (v1's, a KTO label say), kept with its stored tokens (0017)
    extra_info: Mapped[str | None] = mapped_column(Text, nullable=True)


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

"""The store's schema: SQLAlchemy 2.0 models and the documented views (revision: :mod:`.connect`).

Alembic migrations in ``migrations/`` create and upgrade this schema; these models are the
single description the code reads and writes through (a test checks the two agree).
Each noun's tables live with it (``orders/tables.py``, ``mixtures/tables.py``, ...) and are
imported here, so that every table is in ``Base.metadata`` whichever module is imported first.
"""

from __future__ import annotations

from importlib import resources

from .base.tables import BaseEntry, Build, Dataset, DatasetTurns, EntryDigest, RejectedRow
from .declarative import INT, NAMING, Base
from .evidence.tables import DuplicateEntry, EvidenceRun, LeakEntry
from .media.tables import MediaFile, RowMedia
from .mixtures.tables import (
    EpochDataset,
    Mixture,
    MixtureDataset,
    MixtureEntry,
    MixtureEpoch,
    MixtureRun,
    MixtureSpan,
    RepeatCount,
    RepeatRow,
)
from .orders.tables import OrderItem, OrderTrim, SkipListRow, SkippedEntry, TrainingOrderRow
from .plans.tables import Pack, PackedEntry, PackingPlanRow, PlanEpoch, PlanMerge
from .specs.tables import (
    LENGTH_CHUNK_ENTRIES,
    AddedTokenUse,
    EntryRender,
    LengthChunk,
    MediaRender,
    RenderBlock,
    RenderCause,
    RenderSpecRow,
    RenderStatus,
    SpecTokens,
)
from .summary_sql import BLOCK_ENTRIES, REPEAT_ROWS

# The render, pack and draw summary tables are declared apart, and imported above so that every table is in
# Base.metadata (PostgreSQL publishing copies them all) whichever module is imported first.

__all__ = ["AddedTokenUse", "Base", "BaseEntry", "BLOCK_ENTRIES", "Build", "Dataset", "DatasetTurns",
           "DuplicateEntry", "EntryDigest", "EntryRender", "EpochDataset", "EvidenceRun", "INT", "LeakEntry",
           "LENGTH_CHUNK_ENTRIES", "LengthChunk", "MediaFile", "MediaRender", "Mixture", "MixtureDataset",
           "MixtureEntry", "MixtureEpoch", "MixtureRun", "MixtureSpan", "NAMING", "OrderItem", "OrderTrim", "Pack",
           "PackedEntry", "PackingPlanRow", "PlanEpoch", "PlanMerge", "RejectedRow", "RenderBlock", "RenderCause",
           "RenderSpecRow", "RenderStatus", "REPEAT_ROWS", "RepeatCount", "RepeatRow", "RowMedia", "schema_script",
           "SkipListRow", "SkippedEntry", "SpecTokens", "TrainingOrderRow", "VIEW_COLUMNS"]


def schema_script() -> str:
    """``schema.sql``: a new store's tables, indexes and views exactly as the migrations make them."""
    return resources.files("dataidx.store").joinpath("schema.sql").read_text()


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
    "plan_balance": ("plan", "epoch", "step", "rank", "packs", "tokens", "cost", "imbalance"),
    "token_composition": ("mixture", "epoch", "dataset", "entries", "tokens", "supervised_tokens", "share_of_tokens"),
    "token_files": ("spec", "file", "folder", "entries", "tokens", "word_bytes", "bytes", "bytes_per_token", "sha256",
                    "created_at"),
    "skips": ("mixture", "skip_list", "dataset", "row", "cut", "who", "why", "request", "created_at"),
    "trimmed": ("order", "mixture", "epoch", "dataset", "row", "cut", "global_batch_size", "seed"),
    "order_steps": ("order", "epoch", "step", "item", "dataset", "row", "cut"),
    "cut_merges": ("plan", "epoch", "outcome", "rows", "entries", "cut_tokens", "tokens"),
    "media": ("id", "kind", "path", "bytes", "xxh3_128", "format", "width", "height", "frames", "fps", "duration",
              "samples", "rate", "channels", "rows", "entries"),
    "entry_media": ("dataset", "row", "cut", "ordinal", "message", "kind", "written", "path", "media_id"),
    "duplicates": ("run", "dataset", "row", "cut", "representative_dataset", "representative_row", "representative_cut",
                   "jaccard", "entry_id", "representative_entry"),
    "exact_duplicates": ("digest", "dataset", "row", "cut", "copies", "representative_dataset", "representative_row",
                         "representative_cut", "entry_id", "representative_entry"),
    "same_prompts": ("digest", "dataset", "row", "cut", "entries", "answers", "messages", "entry_id"),
    "contamination": ("run", "dataset", "row", "cut", "eval_set", "item", "score", "span", "entry_id"),
    "media_tokens": ("spec", "media_id", "kind", "path", "width", "height", "tokens", "grid_t", "grid_h", "grid_w",
                     "frames"),
}

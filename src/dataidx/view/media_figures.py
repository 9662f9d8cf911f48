"""The report's media figures under a spec made with a model folder's processor: per dataset, the
base entries holding media, how many of their tokens are image placeholders and how many text,
and what media cost (entries truncated past an image, failed on media, rows rejected at build).

A text spec, or a store whose rows name no media, has none: its report reads as it did before.
Entry media and placeholder tokens come from :meth:`dataidx.store.Media.under_spec`; lengths,
failures and rejects from the views ``entry_lengths`` and ``rejects``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import Media, StoreHandle

#: Render causes of an entry that failed on its media (dataidx.render.media_render).
MEDIA_CAUSES = ("media", "placeholders")
#: How a build's reject reason starts when the row failed on its media: a file missing,
#: unreadable or not a file (dataidx.sources.media_files, dataidx.index.media), or placeholders
#: and files that do not pair up (dataidx.convert.media's MediaMismatch, through its converter).
MEDIA_REASONS = ("image '%", "video '%", "audio '%", "a %_url block holds %", "MediaMismatch: %")

_LENGTHS = ("SELECT dataset, sum(CASE WHEN status IN ({trains}) THEN tokens ELSE 0 END), "
            f"sum(CASE WHEN status = 'render_error' AND cause IN ({', '.join(repr(c) for c in MEDIA_CAUSES)}) "
            "THEN 1 ELSE 0 END) FROM entry_lengths WHERE spec = {mark} GROUP BY dataset")
_REJECTS = ("SELECT dataset, count(*) FROM rejects WHERE "
            + " OR ".join(["reason LIKE {mark}"] * len(MEDIA_REASONS)) + " GROUP BY dataset")

#: The columns of a :class:`MediaRow`, as ``dataidx report --json`` keys them.
KEYS = ("dataset", "entries", "blocks", "training_entries", "media_tokens", "text_tokens", "media_share",
        "truncated", "failed", "rejected")


@dataclass(frozen=True, kw_only=True)
class MediaRow:
    """One dataset's media under the spec. ``entries``/``blocks``: base entries holding media and
    their media blocks; ``training_entries``: those of them that train; ``media_tokens``: the
    placeholder tokens of the images of the dataset's entries that train (before truncation);
    ``text_tokens``: the rest of those entries' tokens; ``truncated``: entries holding media
    cut at the cutoff; ``failed``: render errors of cause ``media`` or ``placeholders``;
    ``rejected``: rows the build rejected for a media file."""

    dataset: str
    entries: int
    blocks: int
    training_entries: int
    media_tokens: int
    text_tokens: int
    truncated: int
    failed: int
    rejected: int

    @property
    def media_share(self) -> float:
        """The placeholder tokens' share of the tokens of the entries that train."""
        total = self.media_tokens + self.text_tokens
        return self.media_tokens / total if total else 0.0

    def values(self) -> tuple[Any, ...]:
        """The row in :data:`KEYS` order."""
        return (self.dataset, self.entries, self.blocks, self.training_entries, self.media_tokens, self.text_tokens,
                round(self.media_share, 6), self.truncated, self.failed, self.rejected)


def media_rows(handle: StoreHandle, spec: dict[str, Any], datasets: list[str]) -> list[MediaRow] | None:
    """Per dataset (in the order of ``datasets``, the store's), its media under ``spec`` (a
    ``render_specs`` row); None for a text spec or a store without media, whose report shows
    nothing new."""
    if spec.get("processor") is None:
        return None
    with_media = {row.dataset: row for row in Media(handle).under_spec(spec["id"])}
    rejected = dict(handle.all(_REJECTS, *MEDIA_REASONS))
    none = Media.SpecMedia("", 0, 0, 0, 0, 0)
    rows = []
    for dataset, tokens, failed in handle.all(_LENGTHS, spec["name"]):
        found = with_media.get(dataset, none)
        row = MediaRow(dataset=dataset, entries=found.entries, blocks=found.blocks,
                       training_entries=found.training, media_tokens=found.media_tokens,
                       text_tokens=int(tokens or 0) - found.media_tokens, truncated=found.truncated,
                       failed=int(failed or 0), rejected=int(rejected.get(dataset, 0)))
        if row.entries or row.failed or row.rejected:
            rows.append(row)
    order = {dataset: number for number, dataset in enumerate(datasets)}
    return sorted(rows, key=lambda row: order.get(row.dataset, len(order))) or None


def media_document(rows: list[MediaRow] | None) -> list[dict[str, Any]] | None:
    """The rows for ``dataidx report --json`` (None where the report shows none)."""
    return None if rows is None else [dict(zip(KEYS, row.values())) for row in rows]


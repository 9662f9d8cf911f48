"""A render pass over a range of base entries, and the processes that run passes.

:func:`render_range` is the unit of work of ``dataidx render``: given a :class:`RenderPass` (the
open store, the spec's renderer, the layout of stored words) and entries ``[first, last)``, it
returns their rows, plain added-token uses and words, and touches nothing else. Ranges are
independent, so one process per core renders them (:func:`run_passes`), and a later issue can
send them to other machines. The parent keeps what they return (:mod:`.lengths`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from multiprocessing import get_context
from typing import ClassVar, NamedTuple

import numpy as np

from ..convert import truncate
from ..errors import ConversionError, bounded
from ..read import EntryReader
from ..store import Media, Specs
from .batches import Batch, draft_row, length_row
from .bounds import Boundaries
from .media_families import medium
from .media_render import MediaRenderer
from .renderer import Renderer, extra_info
from .spool import AddedUses
from .token_pass import ChunkTokens
from .tokens import TokenChunk


@dataclass(frozen=True)
class RenderPass:
    """What rendering a range of entries reads: the store's entries and rows, the spec's renderer,
    and the dtype of stored words (``None``: lengths only, no ``--store-tokens``). One object per
    render, handed to each worker, so no module state says which store or spec a worker renders."""

    reader: EntryReader
    renderer: Renderer
    words: np.dtype | None = None
    #: the spec's renderer of entries that hold media (a processor's spec; None: a text spec)
    media: MediaRenderer | None = None


class RangeRendered(NamedTuple):
    """What a pass over a range returns: one row per base entry (tokens, supervised, full, status,
    detail, ...) in id order, its plain added-token uses, and with ``words`` its training words."""

    rows: list[Specs.LengthRow]
    uses: AddedUses
    tokens: ChunkTokens | None


def entry_ranges(first: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[first, end)`` split into ranges ``[start, stop)`` of at most ``size`` entries: a task each."""
    return [(start, min(start + size, end)) for start in range(first, end, size)]


def render_range(work: RenderPass, first: int, last: int) -> RangeRendered:
    """Render base entries ``[first, last)`` under ``work``: their rows, uses and words.

    The entries of one row are consecutive: the row is read and converted once for all of them,
    and each cut is a slice of it. A cut whose message count alone is past the renderer's bound
    is ``too_long`` before anything is read, one past it by what the row holds before its text is
    written; the rest go to the tokenizer in batches (:mod:`.batches`).
    """
    reader, renderer = work.reader, work.renderer
    rows: list[Specs.LengthRow] = []
    batch = Batch(renderer, rows, TokenChunk(work.words) if work.words is not None else None)
    boundaries = Boundaries(renderer.tokenizer.added_tokens_decoder)
    past = renderer.floors.count_past(renderer.token_bound)
    found = reader.entries_between(first, last - 1) if last > first else []  # entries_between is inclusive
    media = Media(reader.handle) if work.media is not None else None  # a processor's spec: rows' media
    for (dataset_id, row), group in groupby(found, key=lambda entry: entry[1:3]):
        entries = []
        batch.dataset = dataset_id
        for entry_id, _, _, cut in group:
            if cut is not None and cut >= past:
                over = renderer.over(renderer.floors.least_of_count(cut))
                assert over is not None  # past the bound by its message count alone (Floors.count_past)
                rows.append(length_row(entry_id, over))
            else:
                entries.append((entry_id, cut))
        if not entries:
            continue
        try:
            whole = reader.whole(dataset_id, row, [cut for _, cut in entries])
        except ConversionError as exc:
            rows.extend((entry_id, 0, 0, 0, "render_error", bounded(str(exc)), "conversion", None)
                        for entry_id, _ in entries)
            continue
        info = extra_info(whole)
        if info is not None:
            batch.extra_info.update((entry_id, info) for entry_id, _ in entries)
        files = [medium(file) for file in media.entry_files(dataset_id, row)] if media is not None else []
        if files:  # a processor's spec and a row with media: each entry rendered with its own
            assert work.media is not None
            for entry_id, cut in entries:
                sample = whole if cut is None else truncate(whole, cut)
                batch.add([entry_id], [work.media.render(sample, [file for file in files
                                                                  if cut is None or file.message < cut])])
            continue
        for entry_id, cut in entries:
            if cut is None:
                batch.add([entry_id], [renderer.draft(whole, False)])
        cuts = [(entry_id, cut) for entry_id, cut in entries if cut is not None]
        if cuts:
            draft_row(batch, boundaries, whole, cuts)
    batch.flush()
    reader.release_rows()  # a pass over every entry: keep a range's source pages, not all of them
    rows.sort(key=lambda entry: entry[0])
    return RangeRendered(rows, batch.uses, batch.tokens.finished() if batch.tokens is not None else None)


def run_passes(work: RenderPass, ranges: list[tuple[int, int]], jobs: int) -> Generator[RangeRendered, None, None]:
    """:func:`render_range` over each of ``ranges``, in order: here with one job or one range, else
    in ``jobs`` forked processes. Closing the iterator early cancels the ranges not yet begun."""
    if jobs == 1 or len(ranges) <= 1:
        with frozen_heap():
            yield from (render_range(work, first, last) for first, last in ranges)
        return
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork"),
                               initializer=_Worker.start, initargs=(work,))
    try:
        yield from pool.map(_Worker.render, *zip(*ranges))
    finally:
        pool.shutdown(cancel_futures=True)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave the objects alive now (the tokenizer, its vocabulary, transformers' modules, the
    templates) out of the collector's passes while entries render: a render makes many small
    objects, and every full collection walked them all again (the demo's 30k entries render 15%
    faster on one core). Objects made while rendering are collected as ever."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Worker:
    """A pool process's :class:`RenderPass`. The parent passes the object to the pool's initializer
    (``initargs``: fork hands it over as it is, without pickling the reader's open store and mapped
    rows, just as the old module global did), which keeps it here in the worker only; the parent
    never sets it, so two renders in one process share nothing. Tasks are ranges alone."""

    work: ClassVar[RenderPass | None] = None

    @staticmethod
    def start(work: RenderPass) -> None:
        # A worker process per core already fills the cores: the tokenizer's own threads on top
        # would oversubscribe them (measured 15% slower at 2 processes on 2 cores).
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        _Worker.work = work
        gc.freeze()  # what the worker inherited stays: see frozen_heap

    @staticmethod
    def render(first: int, last: int) -> RangeRendered:
        assert _Worker.work is not None, "_Worker.render runs in a pool process that _Worker.start began"
        return render_range(_Worker.work, first, last)

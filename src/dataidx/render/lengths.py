"""``dataidx render``: token lengths and statuses of every base entry under a spec, stored.

Rendering is Python (template) plus Rust (tokenizer) per entry, so the pass splits the index into
chunks rendered by one forked process per core; each returns plain rows, which the parent keeps in
a temporary file (memory holds a chunk, whatever the size) and writes in one transaction on a copy
of the store. A spec is stored under its name with its
fingerprint: the same fingerprint again is a no-op, a different one replaces the lengths, and
the packing plans and stored tokens made from them only when asked to (:mod:`.replacing`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import groupby
from multiprocessing import get_context
from typing import Any

import numpy as np

from ..errors import ConversionError, bounded
from ..progress import CountProgress
from ..read import EntryReader
from ..store import (
    CauseRow,
    Datasets,
    LengthRow,
    ReadIdentity,
    StoredTokenFile,
    StoreHandle,
    budget_mixtures_drawn_before,
    move_spec_tokenizer,
    own_token_files,
    prune_token_files,
    read_token_file,
    render_causes,
    render_counts,
    rewriting,
    save_render_spec,
)
from .batches import Batch, draft_row, length_row
from .bounds import Boundaries
from .renderer import Renderer
from .replacing import refuse_to_replace
from .spec import RenderSpec, make_spec
from .spool import AddedUses, RenderedRows
from .token_pass import ChunkTokens, TokenSink, add_tokens
from .tokenizer_folder import load_tokenizer
from .tokens import TokenChunk

#: Base entries in one chunk of a render pass: one task for a worker process.
ENTRIES_PER_RENDER_CHUNK = 2_000


@dataclass(kw_only=True)
class RenderSummary:
    """What a render pass did: per dataset and status, how many entries."""

    spec: RenderSpec
    entries: int
    #: entries that train under the spec (status ok or truncated): the column ``render_specs.kept``
    kept: int
    counts: list[tuple[str, str, int]]
    seconds: float
    reused: bool = False
    plans_removed: int = 0
    #: mixtures drawn by token budgets under the spec's old lengths, refused until drawn again
    stale_mixtures: list[str] = field(default_factory=list)
    #: ``(dataset, token, entries)``: entries whose data text holds a plain added token (kept, as in v1)
    added_tokens: list[tuple[str, str, int]] = field(default_factory=list)
    #: why entries do not train: per cause, how many and the first (see .causes)
    causes: list[CauseRow] = field(default_factory=list)
    #: what became of entries' reasoning: per status, how many (see .reasoning)
    reasoning: dict[str, int] = field(default_factory=dict)
    #: the spec's token file, when its tokens are stored (``--store-tokens``)
    tokens: StoredTokenFile | None = None
    #: the tokens were added to a spec whose lengths were already stored
    tokens_added: bool = False
    #: the token file of the spec's old rendering, which this one replaced (``replace``)
    tokens_replaced: str | None = None


# The chunk worker's state: set in the parent just before forking, inherited by the workers.
_WORKER: tuple[EntryReader, Renderer, np.dtype | None] | None = None


def render_chunk(first: int, last: int) -> tuple[int, list[LengthRow], AddedUses, ChunkTokens | None]:
    """``(first, rows, uses, tokens)`` for base entries ``first..last``: rows of tokens, supervised,
    full, status, detail, the chunk's :data:`AddedUses`, and with ``--store-tokens`` the words of
    its entries that train (:class:`.tokens.TokenChunk`).

    The entries of one row are consecutive: the row is read and converted once for all of them,
    and each cut is a slice of it. A cut whose message count alone is past the renderer's bound
    is ``too_long`` before anything is read, one past it by what the row holds before its text is
    written; the rest go to the tokenizer in batches (:mod:`.batches`).
    """
    assert _WORKER is not None, "render_chunk runs in a worker forked after the parent set _WORKER"
    reader, renderer, words = _WORKER
    rows: list[LengthRow] = []
    batch = Batch(renderer, rows, TokenChunk(words) if words is not None else None)
    boundaries = Boundaries(renderer.tokenizer.added_tokens_decoder)
    past = renderer.floors.count_past(renderer.token_bound)
    for (dataset_id, row), group in groupby(reader.entries_between(first, last), key=lambda entry: entry[1:3]):
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
        for entry_id, cut in entries:
            if cut is None:
                batch.add([entry_id], [renderer.draft(whole, False)])
        cuts = [(entry_id, cut) for entry_id, cut in entries if cut is not None]
        if cuts:
            draft_row(batch, boundaries, whole, cuts)
    batch.flush()
    reader.release_rows()  # a pass over every entry: keep a chunk's source pages, not all of them
    rows.sort(key=lambda found: found[0])
    return first, rows, batch.uses, batch.tokens.finished() if batch.tokens is not None else None


def render_store(
    store: str | os.PathLike[str], tokenizer: str | os.PathLike[str], *, cutoff: int, template: str | None = None,
    truncation: str = "drop", name: str = "default", jobs: int | None = None, progress: CountProgress | None = None,
    tokenizer_object: Any = None, clock: str | None = None, escapes: str = "special", store_tokens: bool = False,
    tokens_dir: str | os.PathLike[str] | None = None, replace: bool = False,
) -> RenderSummary:
    """Render every base entry of ``store`` and store lengths and statuses under spec ``name``.

    A template that reads the clock (``strftime_now``) renders at ``clock`` (ISO 8601), or at the
    time spec ``name`` recorded when it was first rendered, or now: the spec records it, and every
    reader of its lengths renders at the same time. ``escapes`` says which tokens data text may
    not produce as ids (:mod:`.escape`): ``special`` (v1's) or ``added`` (every added token).

    ``store_tokens`` also writes every training entry's words to the spec's token file (in
    ``tokens_dir``, default ``<store>.tokens``), from which readers then serve without rendering;
    for a spec already rendered the same way it adds them, checking the stored lengths. A spec
    rendered another way is replaced only with ``replace`` if it has plans, stored tokens or
    mixtures drawn by its token budgets, which go with its lengths.

    Example::

        render_store("demo.db", "models/tiny", cutoff=4096, template="chatml", truncation="right")
    """
    global _WORKER
    started = time.perf_counter()
    tokenizer_object = tokenizer_object if tokenizer_object is not None else load_tokenizer(tokenizer)
    with EntryReader(store) as reader:
        stored = _stored(reader.handle, name)
        # A clock-reading template renders at the time the spec first did, unless the user sets one.
        spec, renderer = make_spec(name, tokenizer_object, tokenizer_path=tokenizer, template=template, cutoff=cutoff,
                                   truncation=truncation, clock=clock if clock is not None else stored.clock,
                                   escapes=escapes)
        first, last = stored.first, stored.last
        reused = stored.fingerprint == spec.fingerprint
        if stored.fingerprint is not None and not reused and not replace:
            refuse_to_replace(reader.handle, store, spec, stored.tokens)
        if reused:
            if stored.tokenizer != spec.tokenizer_path:  # same tokenizer, moved: readers load it from here now
                with rewriting(store) as connection:
                    move_spec_tokenizer(connection, name, spec.tokenizer_path)
            if not store_tokens or stored.tokens is not None:
                return RenderSummary(spec=spec, entries=last - first + 1, kept=stored.training_entries,
                                     counts=stored.counts, seconds=time.perf_counter() - started, reused=True,
                                     causes=stored.causes, tokens=stored.tokens)
        jobs = max(1, jobs or os.cpu_count() or 1)
        size = ENTRIES_PER_RENDER_CHUNK
        chunks = [(start, min(start + size - 1, last)) for start in range(first, last + 1, size)]
        sink = TokenSink(store, spec.fingerprint, len(tokenizer_object), tokens_dir) if store_tokens else None
        _WORKER = (reader, renderer, sink.dtype if sink is not None else None)
        try:
            with RenderedRows() as rendered, sink or nullcontext():
                for rows, uses, tokens in _rendered(chunks, jobs, last - first + 1, progress):
                    rendered.add(rows, sink.place(tokens, [row[0] for row in rows]) if sink is not None else None)
                    rendered.added_uses.update(uses)
                if reused:
                    assert sink is not None  # a spec rendered the same way is rendered again only to add tokens
                    return _write_tokens(store, read=reader.identity, stored=stored, spec=spec, rendered=rendered,
                                         sink=sink, started=started)
                summary = _write(store, read=reader.identity, spec=spec, rendered=rendered, started=started,
                                 sink=sink)
                summary.tokens_replaced = stored.tokens.file if stored.tokens is not None else None
            summary.added_tokens = [(reader.datasets[dataset_id].name, token, n) for (dataset_id, token), n in
                                    sorted(rendered.added_uses.items(),
                                           key=lambda use: (use[0][0], -use[1], use[0][1]))]
            return summary
        finally:
            _WORKER = None


def _rendered(chunks: list[tuple[int, int]], jobs: int, total: int, progress: CountProgress | None
              ) -> Iterator[tuple[list[LengthRow], AddedUses, ChunkTokens | None]]:
    done = 0
    if jobs == 1 or len(chunks) == 1:
        results: Iterator[tuple[int, list, AddedUses, ChunkTokens | None]] = (
            render_chunk(*chunk) for chunk in chunks)
        pool = None
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork"), initializer=_one_thread_tokenizer)
        results = pool.map(render_chunk, *zip(*chunks))
    try:
        for _, rows, uses, tokens in results:
            yield rows, uses, tokens
            done += len(rows)
            if progress is not None:
                progress(done, total)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _one_thread_tokenizer() -> None:
    """A worker process per core already fills the cores: the tokenizer's own threads on top
    would oversubscribe them (measured 15% slower at 2 processes on 2 cores)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


@dataclass(kw_only=True)
class _Stored:
    """The base index's id range and, when spec ``name`` exists, what the store holds of it."""

    first: int
    last: int
    fingerprint: str | None = None
    tokenizer: str | None = None
    clock: str | None = None
    training_entries: int = 0
    counts: list[tuple[str, str, int]] = field(default_factory=list)
    causes: list[CauseRow] = field(default_factory=list)
    tokens: StoredTokenFile | None = None


def _stored(handle: StoreHandle, name: str) -> _Stored:
    span = Datasets(handle).entry_range()
    stored = _Stored(first=1, last=0) if span is None else _Stored(first=span[0], last=span[1])
    found = handle.one("SELECT id, fingerprint, tokenizer, clock, kept FROM render_specs WHERE name = {mark}", name)
    if found:
        spec_id, stored.fingerprint, stored.tokenizer, stored.clock, stored.training_entries = found
        stored.counts = render_counts(handle, name)
        stored.causes = render_causes(handle, name)
        stored.tokens = read_token_file(handle, spec_id)
    return stored


def _write(store: str | os.PathLike[str], *, read: ReadIdentity, spec: RenderSpec, rendered: RenderedRows,
           started: float, sink: TokenSink | None) -> RenderSummary:
    columns = {"name": spec.name, "fingerprint": spec.fingerprint, "tokenizer": spec.tokenizer_path,
               "tokenizer_sha256": spec.tokenizer_sha256, "template": spec.template,
               "template_text": spec.template_text, "cutoff": spec.cutoff, "truncation": spec.truncation,
               "dataidx_version": spec.version, "clock": spec.clock, "escapes": spec.escapes}
    with rewriting(store, unchanged=read, task="rendering", command="render") as connection:
        named = own_token_files(connection, store)
        spec_id, plans_removed, counts, causes, seconds = save_render_spec(
            connection, columns, rendered.chunks(), entries=rendered.entries,
            training_entries=rendered.training_entries, started=started, added_uses=rendered.added_uses,
            causes=rendered.causes)
        tokens = sink.publish(connection, spec_id) if sink is not None else None
        stale = budget_mixtures_drawn_before(connection, spec.name)
        kept = own_token_files(connection, store)
    prune_token_files(store, named, kept)  # the file of the spec's old rendering, once no spec names it
    return RenderSummary(spec=spec, entries=rendered.entries, kept=rendered.training_entries, counts=counts,
                         seconds=seconds, plans_removed=plans_removed, stale_mixtures=list(stale), causes=causes,
                         reasoning={cause: n for (kind, cause), (n, _) in rendered.causes.items()
                                    if kind == "reasoning"}, tokens=tokens)


def _write_tokens(store: str | os.PathLike[str], *, read: ReadIdentity, stored: _Stored, spec: RenderSpec,
                  rendered: RenderedRows, sink: TokenSink, started: float) -> RenderSummary:
    """Add the tokens of a spec whose lengths are stored, leaving them as they are."""
    with rewriting(store, unchanged=read, task="storing tokens", command="render --store-tokens") as connection:
        tokens = add_tokens(connection, sink, spec.name, rendered.chunks())
    return RenderSummary(spec=spec, entries=rendered.entries, kept=stored.training_entries, counts=stored.counts,
                         seconds=time.perf_counter() - started, reused=True, causes=stored.causes, tokens=tokens,
                         tokens_added=True)

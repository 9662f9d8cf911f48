"""``dataidx render``: token lengths and statuses of every base entry under a spec, stored.

Rendering is Python (template) plus Rust (tokenizer) per entry, so the index is split into ranges
of entries, each rendered by a pass (:mod:`.passes`) in one forked process per core; each returns
plain rows, which the parent keeps in a temporary file (memory holds a range, whatever the size)
and writes in one transaction on a copy of the store. A spec is stored under its name with its
fingerprint: the same fingerprint again is a no-op, a different one replaces the lengths, and
the packing plans and stored tokens made from them only when asked to (:mod:`.replacing`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator
from contextlib import closing, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import RenderError
from ..progress import CountProgress
from ..read import EntryReader, media_stat
from ..store import Datasets, Media, Mixtures, ReadIdentity, Specs, StoreHandle, rewriting
from .media_families import EntryMedium, medium
from .media_render import MediaRenderer, prove_header_counts
from .passes import RangeRendered, RenderPass, entry_ranges, run_passes
from .processor_folder import holds_processor, load_processor
from .renderer import Renderer
from .replacing import refuse_to_replace
from .request import RenderRequest
from .spec import RenderSpec, make_spec
from .spool import RenderedRows
from .token_pass import TokenSink, add_tokens
from .tokenizer_folder import load_tokenizer
from .tokens import word_dtype

#: Base entries in one range of a render: one task for a worker process.
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
    causes: list[Specs.CauseRow] = field(default_factory=list)
    #: what became of entries' reasoning: per status, how many (see .reasoning)
    reasoning: dict[str, int] = field(default_factory=dict)
    #: the spec's token file, when its tokens are stored (``--store-tokens``)
    tokens: Specs.StoredTokenFile | None = None
    #: the tokens were added to a spec whose lengths were already stored
    tokens_added: bool = False
    #: the token file of the spec's old rendering, which this one replaced (``replace``)
    tokens_replaced: str | None = None


def render_store(request: RenderRequest, *, progress: CountProgress | None = None,
                 tokenizer_object: Any = None) -> RenderSummary:
    """Render every base entry of ``request.store`` and store lengths and statuses under its spec.

    The request is what to render, as data (:class:`.request.RenderRequest`); ``progress`` (a
    callback) and ``tokenizer_object`` (a tokenizer already loaded from ``request.tokenizer``, to
    skip loading it again) are this process's objects, so they stay beside it. A spec's clock is
    the request's, or the one it recorded when it was first rendered: every reader of its lengths
    renders at the same time. The same fingerprint again is a no-op (or, with ``store_tokens``,
    adds the tokens, checking the stored lengths).

    Example::

        render_store(RenderRequest("demo.db", "models/tiny", cutoff=4096, template="chatml", truncation="right"))
    """
    started = time.perf_counter()
    with EntryReader(request.store) as reader:
        setup = prepare(request, reader, tokenizer_object)
        if setup.done is not None:
            return setup.done
        jobs = max(1, request.jobs or os.cpu_count() or 1)
        ranges = entry_ranges(setup.stored.first, setup.stored.last + 1, ENTRIES_PER_RENDER_CHUNK)
        passes = run_passes(setup.work(reader, request.store_tokens), ranges, jobs)
        return store_rendered(request, reader, setup, passes, progress=progress, started=started)


@dataclass(kw_only=True)
class Setup:
    """What a render of a request holds before any entry is rendered: the stored spec of its name,
    the new spec and its renderers, and whether there is anything to render (``done`` is the
    summary when the same spec is stored already). Shared by a render, a shard and a merge."""

    stored: _Stored
    spec: RenderSpec
    renderer: Renderer
    vocabulary: int
    media: MediaRenderer | None = None
    recorded: list[Media.RowFile] = field(default_factory=list)
    reused: bool = False
    done: RenderSummary | None = None

    def work(self, reader: EntryReader, store_tokens: bool) -> RenderPass:
        """The pass that renders ranges of entries, with their words when tokens are stored."""
        return RenderPass(reader, self.renderer, word_dtype(self.vocabulary) if store_tokens else None, self.media)


def prepare(request: RenderRequest, reader: EntryReader, tokenizer_object: Any = None, *,
            proof: bool = True) -> Setup:
    """Load the tokenizer (and the folder's processor, for a store with media), make the spec and
    check it may replace the one stored under its name. ``proof``: decode a sample of the media to
    prove header counts (a shard leaves that to the merge)."""
    started = time.perf_counter()
    store, name = request.store, request.name
    recorded = Media(reader.handle).recorded()
    processor = load_processor(request.tokenizer) if recorded and holds_processor(request.tokenizer) else None
    if processor is not None and tokenizer_object is not None:
        processor.tokenizer = tokenizer_object
    elif processor is not None:
        tokenizer_object = processor.tokenizer
    elif tokenizer_object is None:
        tokenizer_object = load_tokenizer(request.tokenizer, trust_remote_code=request.trust_remote_code)
    stored = _stored(reader.handle, name)
    # A clock-reading template renders at the time the spec first did, unless the user sets one.
    spec, renderer = make_spec(name, tokenizer_object, tokenizer_path=request.tokenizer, template=request.template,
                               cutoff=request.cutoff, truncation=request.truncation,
                               clock=request.clock if request.clock is not None else stored.clock,
                               escapes=request.escapes, trust_remote_code=request.trust_remote_code,
                               processor=processor)
    reused = stored.fingerprint == spec.fingerprint
    if stored.fingerprint is not None and not reused and not request.replace:
        refuse_to_replace(reader.handle, store, spec, stored.tokens)
    setup = Setup(stored=stored, spec=spec, renderer=renderer, vocabulary=len(tokenizer_object), recorded=recorded,
                  reused=reused)
    if reused:
        if stored.tokenizer != spec.tokenizer_path:  # same tokenizer, moved: readers load it from here now
            with rewriting(store) as connection:
                Specs(connection).move_tokenizer(name, spec.tokenizer_path)
        if not request.store_tokens or stored.tokens is not None:
            setup.done = RenderSummary(spec=spec, entries=stored.last - stored.first + 1, kept=stored.training_entries,
                                       counts=stored.counts, seconds=time.perf_counter() - started, reused=True,
                                       causes=stored.causes, tokens=stored.tokens)
            return setup
    if processor is not None:
        setup.media = MediaRenderer(processor, renderer)
        if not reused and proof:  # decode a sample of the media: header counts must be the processor's
            setup.spec = replace(spec, media_proof=prove_header_counts(processor, _placed(recorded, reader.path)))
    return setup


def store_rendered(request: RenderRequest, reader: EntryReader, setup: Setup, passes: Iterator[RangeRendered], *,
                   progress: CountProgress | None, started: float) -> RenderSummary:
    """Keep what ``passes`` rendered (every base entry, in id order: a serial render's ranges, or
    the parts of a sharded one) and write it as the spec, in one write."""
    store, stored, spec = request.store, setup.stored, setup.spec
    sink = (TokenSink(store, spec.fingerprint, setup.vocabulary, request.tokens_dir)
            if request.store_tokens else None)
    with RenderedRows() as rendered, sink or nullcontext():
        for rows, uses, tokens in _progressed(passes, stored.last - stored.first + 1, progress):
            rendered.add(rows, sink.place(tokens, [row[0] for row in rows]) if sink is not None else None)
            rendered.added_uses.update(uses)
        return write_rendered(request, reader, setup, rendered, sink, started=started)


def write_rendered(request: RenderRequest, reader: EntryReader, setup: Setup, rendered: RenderedRows | Specs.PartRows,
                   sink: TokenSink | None, *, started: float) -> RenderSummary:
    """Write every base entry's rows (kept by a render, or a merge's parts) as the spec, or only
    add their tokens to the spec stored the same way; the summary says what was written."""
    store, stored, spec = request.store, setup.stored, setup.spec
    if setup.reused:
        assert sink is not None  # a spec rendered the same way is rendered again only to add tokens
        return write_spec_tokens(store, read=reader.identity, stored=stored, spec=spec, rendered=rendered,
                                 sink=sink, started=started)
    summary = write_spec(store, read=reader.identity, spec=spec, rendered=rendered, started=started, sink=sink,
                         media=media_counts(setup.media, setup.recorded) if setup.media is not None else [])
    summary.tokens_replaced = stored.tokens.file if stored.tokens is not None else None
    summary.added_tokens = [(reader.datasets[dataset_id].name, token, n) for (dataset_id, token), n in
                            sorted(rendered.added_uses.items(), key=lambda use: (use[0][0], -use[1], use[0][1]))]
    return summary


def _progressed(passes: Iterator[RangeRendered], total: int, progress: CountProgress | None
                ) -> Iterator[RangeRendered]:
    """``passes`` as they come, telling ``progress`` how many entries are rendered after each;
    closing it closes ``passes`` (which cancels the ranges not yet begun)."""
    done = 0
    with closing(passes) if isinstance(passes, Generator) else nullcontext():
        for rendered in passes:
            yield rendered
            done += len(rendered.rows)
            if progress is not None:
                progress(done, total)


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
    causes: list[Specs.CauseRow] = field(default_factory=list)
    tokens: Specs.StoredTokenFile | None = None


def _stored(handle: StoreHandle, name: str) -> _Stored:
    span = Datasets(handle).entry_range()
    stored = _Stored(first=1, last=0) if span is None else _Stored(first=span[0], last=span[1])
    specs = Specs(handle)
    found = specs.find(name)
    if found:
        stored.fingerprint, stored.tokenizer, stored.clock = found["fingerprint"], found["tokenizer"], found["clock"]
        stored.training_entries = found["kept"]
        stored.counts = specs.counts(name)
        stored.causes = specs.causes(name)
        stored.tokens = specs.token_file(found["id"])
    return stored


def _placed(files: list[Media.RowFile], store: str) -> list[EntryMedium]:
    """Recorded files where they are now (at their place beside a moved store, as fetches look)."""
    folder = Datasets.folder_of(store)
    return [medium(file, _where(file, folder)) for file in files]


def _where(image: Media.RowFile, folder: str | None) -> str:
    """Where a recorded file is now; its recorded path when it is gone (reading it then says so)."""
    try:
        return media_stat(image.path, image.relative, folder)[0]
    except OSError:
        return image.path


def media_counts(media: MediaRenderer, files: list[Media.RowFile]) -> list[Specs.MediaCountRow]:
    """``(media id, tokens, grid_t, grid_h, grid_w, frames)`` of each file of the processor's kind
    (a file it cannot count records nothing: its entries say why)."""
    counted: list[Specs.MediaCountRow] = []
    for file in files:
        if file.kind != media.family.kind:
            continue
        try:
            count = media.count(medium(file))
        except RenderError:
            continue
        t, h, w = count.grid or (None, None, None)
        counted.append((file.media_id, count.tokens, t, h, w, count.frames))
    return counted


def write_spec(store: str | os.PathLike[str], *, read: ReadIdentity, spec: RenderSpec,
               rendered: RenderedRows | Specs.PartRows, started: float, sink: TokenSink | None,
               media: list[Specs.MediaCountRow]) -> RenderSummary:
    """Store ``spec`` with its rows (kept by a render, or a merge's parts), in one write."""
    columns = {"name": spec.name, "fingerprint": spec.fingerprint, "tokenizer": spec.tokenizer_path,
               "tokenizer_sha256": spec.tokenizer_sha256, "template": spec.template,
               "template_text": spec.template_text, "cutoff": spec.cutoff, "truncation": spec.truncation,
               "dataidx_version": spec.version, "clock": spec.clock, "escapes": spec.escapes,
               "trust_remote_code": spec.trust_remote_code, "processor": spec.processor,
               "media_proof": spec.media_proof}
    with rewriting(store, unchanged=read, task="rendering", command="render") as connection:
        specs = Specs(connection)
        named = specs.own_token_files(store)
        spec_id, plans_removed, counts, causes, seconds = specs.save(
            columns, rendered.chunks() if isinstance(rendered, RenderedRows) else rendered, entries=rendered.entries,
            training_entries=rendered.training_entries, started=started, added_uses=rendered.added_uses,
            causes=rendered.causes)
        if media:
            specs.save_media(spec_id, media)
        tokens = sink.publish(connection, spec_id) if sink is not None else None
        # Mixtures drawn by token budgets under the spec's old lengths: refused until drawn again.
        stale = Mixtures(connection).stale(spec=spec.name)
        kept = specs.own_token_files(store)
    Specs.prune_token_files(store, named, kept)  # the file of the spec's old rendering, once no spec names it
    return RenderSummary(spec=spec, entries=rendered.entries, kept=rendered.training_entries, counts=counts,
                         seconds=seconds, plans_removed=plans_removed, stale_mixtures=list(stale), causes=causes,
                         reasoning={cause: n for (kind, cause), (n, _) in rendered.causes.items()
                                    if kind == "reasoning"}, tokens=tokens)


def write_spec_tokens(store: str | os.PathLike[str], *, read: ReadIdentity, stored: _Stored, spec: RenderSpec,
                      rendered: RenderedRows | Specs.PartRows, sink: TokenSink, started: float) -> RenderSummary:
    """Add the tokens of a spec whose lengths are stored, leaving them as they are."""
    with rewriting(store, unchanged=read, task="storing tokens", command="render --store-tokens") as connection:
        tokens = add_tokens(connection, sink, spec.name, rendered.chunks())
    return RenderSummary(spec=spec, entries=rendered.entries, kept=stored.training_entries, counts=stored.counts,
                         seconds=time.perf_counter() - started, reused=True, causes=stored.causes, tokens=tokens,
                         tokens_added=True)

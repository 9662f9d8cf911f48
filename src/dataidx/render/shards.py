"""Rendering in shards, on this machine's processes or anywhere a store and a folder are shared,
and the merge that stores them as one serial render would.

``dataidx render ... --shard R/N --parts DIR`` renders shard ``R`` of ``N`` (a contiguous range of
the base entries' ids, :func:`shard_range`) into a part (:mod:`.parts`) without writing the
store: it reads only its range's rows. A shard whose manifest is there and checks is skipped, so
running every shard's command again after a failure renders only the shards that did not finish.
``dataidx merge STORE DIR`` checks that the parts cover the spec's base entries exactly once,
under one fingerprint and build, each file as its manifest says, then keeps them through the path
a serial render keeps its ranges (:func:`~.lengths.store_rendered`) and writes them in one write.
Rows, summaries and the token file are then a serial render's, whatever ``N``: the rows are the
same pure function of each entry, and every summary is computed from them in the write.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import closing, nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import RenderError, StoreError, UsageError
from ..progress import CountProgress
from ..read import EntryReader
from ..store import Datasets, Specs
from .lengths import ENTRIES_PER_RENDER_CHUNK, RenderSummary, Setup, prepare, write_rendered
from .parts import Manifest, PartWriter, append_part_words, check_files, part_files, part_name, read_manifest
from .passes import entry_ranges, run_passes
from .request import RenderRequest
from .token_pass import TokenSink

#: The request's fields that do not change what is rendered (a shard may run with other ones).
_NOT_RENDERED = ("jobs",)


@dataclass(frozen=True)
class ShardOutcome:
    """What ``--shard R/N`` did: rendered its part, or found it done and skipped it."""

    shard: int
    shards: int
    first: int
    last: int
    skipped: bool
    seconds: float
    manifest: Path

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


def parse_shard(text: str) -> tuple[int, int]:
    """``R/N`` (a Slurm array's ``$SLURM_ARRAY_TASK_ID/N``) as ``(R, N)``, or a one-line UsageError."""
    number, _, total = text.partition("/")
    try:
        shard, shards = int(number), int(total)
    except ValueError:
        raise UsageError(f"--shard {text!r}: give R/N, shard R (from 0) of N, as in 3/8") from None
    if not 0 <= shard < shards:
        raise UsageError(f"--shard {text}: shards are numbered 0 to N-1 of N >= 1")
    return shard, shards


def shard_range(first: int, last: int, shard: int, shards: int) -> tuple[int, int]:
    """Base entries ``[start, end]`` of shard ``shard`` of ``shards`` over entries ``first..last``:
    contiguous, as even as whole entries allow, together each entry exactly once."""
    if not 0 <= shard < shards:
        raise RenderError(f"shard {shard}/{shards}: a shard is numbered from 0 to {shards - 1}")
    total = last - first + 1
    return first + total * shard // shards, first + total * (shard + 1) // shards - 1


def request_record(request: RenderRequest, clock: str | None) -> dict[str, Any]:
    """What a manifest records of the request: everything that decides what is rendered, its
    folders made absolute where the shard ran (the merge may run elsewhere), and the clock its
    spec renders at (``clock``: None for a template that does not read the date, whatever was given)."""
    record = {key: (os.fspath(value) if isinstance(value, os.PathLike) else value)
              for key, value in asdict(request).items() if key not in _NOT_RENDERED}
    record["clock"] = clock
    for key in ("tokenizer", "tokens_dir"):
        if record[key] is not None:
            record[key] = str(Path(record[key]).resolve())
    return record


def render_shard(request: RenderRequest, shard: int, shards: int, parts: str | os.PathLike[str], *,
                 progress: CountProgress | None = None, tokenizer_object: Any = None) -> ShardOutcome:
    """Render shard ``shard`` of ``shards`` of ``request`` into folder ``parts``, with the
    request's ``jobs`` processes (default all cores); the store is read, never written. Skipped
    when its part is already there and checks."""
    return render_shards(request, [shard], shards, parts, progress=progress, tokenizer_object=tokenizer_object)[0]


def render_shards(request: RenderRequest, numbers: Sequence[int], shards: int, parts: str | os.PathLike[str], *,
                  progress: CountProgress | None = None, tokenizer_object: Any = None) -> list[ShardOutcome]:
    """Render shards ``numbers`` of ``shards`` of ``request`` into folder ``parts``: every range of
    2,000 entries of every shard not done yet goes to one pool of the request's ``jobs``
    processes, and each range's rows are written into its shard's part as it comes, so no
    process waits while another shard renders (two shards of a mixed store, alpaca then
    conversations, differ by 15% in time); a shard's part is complete, with its manifest, before
    the next one's rows are written. ``progress`` counts the entries rendered."""
    started = time.perf_counter()
    folder = Path(parts)
    with EntryReader(request.store) as reader:
        setup = prepare(request, reader, tokenizer_object, proof=False)
        first, last = setup.stored.first, setup.stored.last
        spans = {shard: shard_range(first, last, shard, shards) for shard in numbers}
        manifests = {shard: folder / f"{part_name(shard, shards)}.json" for shard in numbers}
        if setup.done is not None:  # stored rendered this way already: nothing to render, as a serial render
            return [ShardOutcome(shard, shards, *spans[shard], True, time.perf_counter() - started, manifests[shard])
                    for shard in numbers]
        if setup.spec.clock is not None and request.clock is None and setup.stored.clock is None:
            raise RenderError("the template reads the date (strftime_now): give every shard the same --clock "
                              "(YYYY-MM-DDTHH:MM:SS), or each would render at its own time")
        build = _build_digest(reader)
        pending = [shard for shard in numbers if not _finished(manifests[shard], setup.spec.fingerprint, build,
                                                                *spans[shard])]
        ranges = {shard: entry_ranges(spans[shard][0], spans[shard][1] + 1, ENTRIES_PER_RENDER_CHUNK)
                  for shard in pending}
        work = setup.work(reader, request.store_tokens)
        jobs = max(1, request.jobs or os.cpu_count() or 1)
        datasets = [(dataset_id, found.first_entry, found.entries) for dataset_id, found in reader.datasets.items()]
        passes = run_passes(work, [span for shard in pending for span in ranges[shard]], jobs)
        done, total = 0, sum(spans[shard][1] - spans[shard][0] + 1 for shard in pending)
        outcomes = {}
        with closing(passes):
            for shard in pending:
                begun = time.perf_counter()
                with PartWriter(folder, shard, shards, fingerprint=setup.spec.fingerprint, dtype=work.words,
                                datasets=datasets) as writer:
                    for rendered in islice(passes, len(ranges[shard])):
                        writer.add(rendered)
                        done += len(rendered.rows)
                        if progress is not None:
                            progress(done, total)
                    writer.finish({"shard": shard, "shards": shards, "first": spans[shard][0],
                                   "last": spans[shard][1], "fingerprint": setup.spec.fingerprint, "build": build,
                                   "version": __version__, "request": request_record(request, setup.spec.clock)})
                outcomes[shard] = ShardOutcome(shard, shards, *spans[shard], False, time.perf_counter() - begun,
                                               manifests[shard])
    return [outcomes.get(shard) or ShardOutcome(shard, shards, *spans[shard], True, 0.0, manifests[shard])
            for shard in numbers]


def merge_parts(store: str | os.PathLike[str], parts: str | os.PathLike[str], *,
                progress: CountProgress | None = None, tokenizer_object: Any = None,
                request: RenderRequest | None = None) -> RenderSummary:
    """Store the parts in folder ``parts`` as their spec, in one write, equal to a serial render;
    refused in one line, the store untouched, unless they are exactly its base entries' parts.
    ``request`` (a runner's own) is checked first: a spec stored that way already needs no parts."""
    started = time.perf_counter()
    manifests = _manifests(Path(parts)) if request is None else []
    request = request or RenderRequest(**{**manifests[0].request, "store": store})
    with EntryReader(store) as reader:
        setup = prepare(request, reader, tokenizer_object)
        if setup.done is not None:  # the spec is stored this way already (merged before): nothing to do
            return setup.done
        manifests = manifests or _manifests(Path(parts))
        if _rendering(request_record(request, setup.spec.clock)) != _rendering(manifests[0].request):
            raise RenderError(f"{manifests[0].path}: a part of another request than this render's; give its own "
                              "--parts folder")
        _check_cover(manifests, setup.stored.first, setup.stored.last, _build_digest(reader), setup.spec.fingerprint)
        for manifest in manifests:
            check_files(manifest)
        return _store_parts(request, reader, setup, manifests, started=started)


def with_fixed_clock(request: RenderRequest) -> RenderRequest:
    """``request`` with one clock for all its shards: the one given, else the one its spec
    recorded, else now (a template that does not read the date ignores it)."""
    if request.clock is not None:
        return request
    with EntryReader(request.store) as reader:
        found = Specs(reader.handle).find(request.name)
    if found is not None and found["clock"] is not None:
        return request
    return replace(request, clock=datetime.now().isoformat(timespec="seconds"))


def render_in_shards(request: RenderRequest, shards: int, parts: str | os.PathLike[str], *,
                     processes: int | None = None, progress: CountProgress | None = None) -> list[ShardOutcome]:
    """The local runner: every shard, its ranges rendered by ``processes`` processes of this
    machine (default all cores) in one pool (:func:`render_shards`); a shard whose part is done
    already is skipped; ``progress`` counts the entries rendered."""
    one = replace(with_fixed_clock(request), jobs=processes or request.jobs)  # a runner's fixed it already
    return render_shards(one, range(shards), shards, parts, progress=progress)


def up_to_date(request: RenderRequest) -> RenderSummary | None:
    """The summary of the request's spec when the store holds it rendered this way already (a
    runner then starts nothing); None when there is something to render."""
    with EntryReader(request.store) as reader:
        return prepare(request, reader).done


def base_entries(request: RenderRequest) -> int:
    """How many base entries the request's store holds (what its shards render together)."""
    with EntryReader(request.store) as reader:
        found = Datasets(reader.handle).entry_range()
    return 0 if found is None else found[1] - found[0] + 1


def _rendering(record: dict[str, Any]) -> dict[str, Any]:
    """What of a recorded request decides the parts (the store is checked by its build's digest)."""
    return {key: value for key, value in record.items() if key != "store"}


def _finished(path: Path, fingerprint: str, build: str, first: int, last: int) -> bool:
    """Whether the part at ``path`` is complete for this shard: a manifest of this spec, build and
    range whose files check. Any other part there is rendered again (and replaced)."""
    if not path.exists():
        return False
    try:
        manifest = read_manifest(path)
        if (manifest.fingerprint, manifest.build, manifest.first, manifest.last) != (fingerprint, build, first, last):
            return False
        check_files(manifest)
    except RenderError:
        return False
    return True


def _manifests(folder: Path) -> list[Manifest]:
    """The folder's manifests, one per shard of one layout, in shard order."""
    if not folder.is_dir():
        raise RenderError(f"{folder}: not a folder of render parts")
    found = [read_manifest(path) for path in sorted(folder.glob("shard-*-of-*.json"))]
    if not found:
        raise RenderError(f"{folder}: holds no render part (shard-R-of-N.json); render the shards first")
    shards = found[0].shards
    for manifest in found:
        if manifest.shards != shards:
            raise RenderError(f"{manifest.path}: a part of {manifest.shards} shards beside parts of {shards}: parts of "
                              "two renders in one folder")
        if (manifest.fingerprint, manifest.request) != (found[0].fingerprint, found[0].request):
            raise RenderError(f"{manifest.path}: a part of another spec than {found[0].path.name}'s (another "
                              "tokenizer, template, cutoff or request)")
    numbers = [manifest.shard for manifest in found]
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    if repeated:
        raise RenderError(f"{folder}: two parts cover shard {repeated[0]} of {shards}")
    missing = sorted(set(range(shards)) - set(numbers))
    if missing:
        raise RenderError(f"{folder}: shard {missing[0]} of {shards} is missing ({len(missing)} of {shards} are): "
                          f"render it with --shard {missing[0]}/{shards}")
    return sorted(found, key=lambda manifest: manifest.shard)


def _check_cover(manifests: list[Manifest], first: int, last: int, build: str, fingerprint: str) -> None:
    """The parts are this store's build's, this spec's, and cover its base entries exactly once."""
    for manifest in manifests:
        if manifest.build != build:
            raise RenderError(f"{manifest.path}: a part of another build of the store (rebuilt since it was "
                              "rendered); render the shards again")
        if manifest.fingerprint != fingerprint:
            raise RenderError(f"{manifest.path}: rendered under fingerprint {manifest.fingerprint[:12]}, and the "
                              f"request gives {fingerprint[:12]} here now (the tokenizer or dataidx changed); render "
                              "the shards again")
        wanted = shard_range(first, last, manifest.shard, manifest.shards)
        if (manifest.first, manifest.last) != wanted:
            raise RenderError(f"{manifest.path}: covers base entries {manifest.first}..{manifest.last}, and shard "
                              f"{manifest.shard} of {manifest.shards} is {wanted[0]}..{wanted[1]} of this store")


def _store_parts(request: RenderRequest, reader: EntryReader, setup: Setup, manifests: list[Manifest], *,
                 started: float) -> RenderSummary:
    """Write the parts as the spec, in one write: their token files appended to the spec's, their
    rows copied from their files by SQLite, their summaries summed (a serial render's, whatever N)."""
    spec = setup.spec
    sink = (TokenSink(request.store, spec.fingerprint, setup.vocabulary, request.tokens_dir)
            if request.store_tokens else None)
    with sink or nullcontext():
        try:
            files = []
            for manifest, rows, tokens in zip(manifests, *part_files(manifests)):
                base, words = 0, 0
                if sink is not None:
                    if tokens is None:
                        raise StoreError(f"{manifest.path}: a part without tokens, and the request stores them")
                    base, words = append_part_words(sink, tokens, manifest.first, manifest.last)
                files.append(Specs.PartFile(rows, manifest.first, manifest.last, base, words))
            rendered = Specs.read_parts(files)
        except StoreError as exc:
            raise RenderError(f"{exc}; render the shard again") from None
        if sink is not None:
            sink.entries = rendered.training_entries  # every entry that trains has its words in its part
        return write_rendered(request, reader, setup, rendered, sink, started=started)


def _build_digest(reader: EntryReader) -> str:
    return next(digest for kind, _, digest in reader.identity.parts if kind == "build")

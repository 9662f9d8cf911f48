"""``dataidx verify --tokens``: a spec's stored tokens checked against a fresh rendering.

Opening a token file checks what costs nothing (header, fingerprint, size); this reads it all:
the words' sha256 against the one recorded when the file was written, then a seeded sample of
the spec's training entries (or every one) rendered again with the spec's tokenizer and template
and compared word for word, labels and weights included, with what the file serves. The packing
plans over the spec are recounted too (as plain ``dataidx verify`` recounts every plan).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataidxError
from ..progress import CountProgress
from ..read import EntryReader
from ..sources import paused_gc
from ..store import Plans, Specs, reading
from .from_tokens import TokenServer
from .media_features import MediaServing
from .spec import StoredSpec, read_spec
from .token_file import START, TokenFile

#: Entries rendered and compared at a time: one tokenizer batch.
VERIFY_BATCH = 256
_PLACES = Specs.FETCH_PLACES


@dataclass(kw_only=True)
class TokensReport:
    """What verifying one spec's tokens found."""

    spec: str
    file: str = ""
    entries: int = 0
    checked: int = 0
    #: ``(dataset, row, cut, what differs)`` of the first entries that differ
    mismatches: list[tuple[str, int, int | None, str]] = field(default_factory=list)
    different: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.different

    def as_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "file": self.file, "ok": self.ok, "entries": self.entries, "checked": self.checked,
                "different": self.different, "problems": self.problems,
                "mismatches": [{"dataset": d, "row": r, "cut": c, "differs": what}
                               for d, r, c, what in self.mismatches]}


def verify_tokens(store: str | os.PathLike[str], *, spec: str | None = None, sample: int = 1000, seed: int = 0,
                  every: bool = False, tokenizer: Any = None, progress: CountProgress | None = None,
                  trust_remote_code: bool = False) -> list[TokensReport]:
    """Check the stored tokens of spec ``spec`` (default: every spec that has them): the words'
    digest, and ``sample`` training entries drawn with ``seed`` (``every``: all of them)
    rendered again and compared with what the token file serves. A spec rendered with
    ``--trust-remote-code`` loads its tokenizer only with ``trust_remote_code``.

    Example::

        [report.ok for report in verify_tokens("demo.db", sample=10_000)]
    """
    with EntryReader(store) as reader:
        handle = reader.handle
        names = [spec] if spec is not None else Specs(handle).names_with_tokens()
        reports = []
        for name in names:
            stored = read_spec(handle, name)
            report = TokensReport(spec=name)
            reports.append(report)
            report.problems += Plans(handle).problems(stored.id)  # what the plans over its tokens serve
            record = Specs(handle).token_file(stored.id)
            if record is None:
                report.problems.append(f"spec '{name}' has no stored tokens; run dataidx render --store-tokens")
                continue
            try:
                report.file = os.fspath(record.path(reader.path))
                tokens = TokenFile(record.path(reader.path), spec=name, fingerprint=stored.fingerprint,
                                   word_bytes=record.word_bytes, words=record.tokens)
            except DataidxError as exc:
                report.problems.append(str(exc))
                continue
            if tokens.sha256() != record.sha256:
                report.problems.append(f"{report.file}: its words' sha256 is not the one recorded when it was written "
                                       f"(edited?); run dataidx render --store-tokens again for spec '{name}'")
            _compare(reader, stored, tokens, report, sample=None if every else sample, seed=seed,
                     tokenizer=tokenizer, progress=progress, trust_remote_code=trust_remote_code)
    return reports


def token_file_problems(store: str | os.PathLike[str]) -> dict[str, list[str]]:
    """``{spec: [problems]}`` of every spec with stored tokens, as opening its file finds them
    (missing, not a regular file, truncated, another rendering's, its index's ends): what plain
    ``dataidx verify`` checks of token files, at no cost; ``--tokens`` reads them whole."""
    found: dict[str, list[str]] = {}
    with reading(store) as handle:
        for name in Specs(handle).names_with_tokens():
            stored = read_spec(handle, name)
            record = Specs(handle).token_file(stored.id)
            assert record is not None  # names_with_tokens names the specs that have one
            try:
                TokenFile(record.path(store), spec=name, fingerprint=stored.fingerprint, word_bytes=record.word_bytes,
                          words=record.tokens)
                found[name] = []
            except DataidxError as exc:
                found[name] = [str(exc)]
    return found


def _compare(reader: EntryReader, spec: StoredSpec, tokens: TokenFile, report: TokensReport, *, sample: int | None,
             seed: int, tokenizer: Any, progress: CountProgress | None, trust_remote_code: bool) -> None:
    entry_ids = Specs(reader.handle).training_entries(spec.id)
    report.entries = len(entry_ids)
    if sample is not None and sample < len(entry_ids):
        entry_ids = sorted(random.Random(seed).sample(entry_ids, sample))
    renderer = spec.renderer(tokenizer, trust_remote_code=trust_remote_code)
    server = TokenServer(tokens, spec.id, reader.datasets, reader.path)
    media = MediaServing.open(spec, reader.handle, reader.path, renderer, tokenizer)  # a processor's spec
    for start in range(0, len(entry_ids), VERIFY_BATCH):
        batch = entry_ids[start: start + VERIFY_BATCH]
        triples = reader.entries_by_id(batch)
        _check_index(reader, spec, tokens, batch, report)
        try:
            served = server.get(batch, reader.fetch)
        except DataidxError as exc:
            report.problems.append(str(exc))
            return
        with paused_gc():
            fresh = (media.render(reader, renderer, triples, media.files(triples)) if media is not None else
                     renderer.render_many([(reader.sample(*triple), triple[2] is not None) for triple in triples]))
        for (dataset_id, row, cut), one, again in zip(triples, served, fresh):
            one = {key: value for key, value in one.items() if key != "_dataset_name"}
            if one != again.as_dict():
                report.different += 1
                if len(report.mismatches) < 5:
                    report.mismatches.append((reader.datasets[dataset_id].name, row, cut,
                                              _difference(one, again.as_dict())))
        report.checked += len(batch)
        if progress is not None:
            progress(report.checked, len(entry_ids))


def _check_index(reader: EntryReader, spec: StoredSpec, tokens: TokenFile, batch: list[int],
                 report: TokensReport) -> None:
    """The file's index places each entry where the store's ``entry_renders`` does."""
    index, first = tokens.index_array, tokens.first_entry
    for entry_id, offset, count in reader.fetch(_PLACES, spec.id, json.dumps(batch)):
        at = entry_id - first
        start = int(index[at] & START) if 0 <= at < tokens.entries else -1
        end = int(index[at + 1] & START) if 0 <= at < tokens.entries else -1
        if (start, end - start) != (offset, count) and len(report.problems) < 5:
            report.problems.append(f"{report.file}: its index places base entry {entry_id} at words {start}.."
                                   f"{end}, the store at {offset}..{offset + count}: edited; run dataidx render "
                                   f"--store-tokens again for spec '{spec.name}'")


def _difference(served: dict[str, Any], rendered: dict[str, Any]) -> str:
    """Which field first differs, and where."""
    for key in rendered:
        if served.get(key) != rendered[key]:
            mine, theirs = served.get(key), rendered[key]
            if isinstance(mine, list) and isinstance(theirs, list):
                at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
                return f"{key} from token {at} (stored {len(mine)} tokens, rendered {len(theirs)})"
            return key
    return "fields"

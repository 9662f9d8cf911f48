"""Render specs behind one object: how a store's entries were rendered, each entry's lengths and
status under a spec, its token file, why entries do not train, and the added tokens in data.
Written by ``dataidx render`` (:mod:`dataidx.render`), read by every reader of lengths and tokens.

Reads and small writes are templates through a handle or a writer's working copy, so opening a
spec loads neither SQLAlchemy nor NumPy; the bulk write of a spec's lengths is :mod:`.writes`,
imported when :meth:`Specs.save` runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..dialect import STATUSES, TRAINING_STATUSES
from ..location import tokens_folder
from ..orders.records import Orders
from ..plans.records import Plans
from ..sqlite.working_copy import Access, access, writable
from . import causes, rows, token_files
from .reasoning import REASONING, REASONING_PROBLEM_SUMS, REASONING_PROBLEMS, REASONING_SAID

if TYPE_CHECKING:
    from .part_rows import PartRows, PartRowsWriter

#: Every column of a spec's row, as :meth:`Specs.find` returns them.
_COLUMNS = ("id", "name", "fingerprint", "tokenizer", "tokenizer_sha256", "template", "template_text", "cutoff",
            "truncation", "entries", "kept", "dataidx_version", "clock", "escapes", "trust_remote_code", "created_at",
            "seconds", "processor", "media_proof")
_SPEC = f"SELECT {', '.join(_COLUMNS)} FROM render_specs WHERE name = {{mark}}"
_TRAINING = "SELECT entry_id FROM entry_renders WHERE spec_id = {mark} AND status IN ({trains}) ORDER BY entry_id"
# What a token reader fetches per batch of entries: where each entry's words lie, and its sides' extras.
_PLACES = ("SELECT {stamped}entry_id, token_offset, tokens FROM entry_renders WHERE spec_id = {mark} "
           "AND entry_id IN ({ids})")
_EXTRAS = ("SELECT {stamped}entry_id, side_tokens, token_weights, extra_info FROM entry_renders "
           "WHERE spec_id = {mark} AND entry_id IN ({ids})")
_PLACEMENTS = ("SELECT {stamped}entry_id, token_offset, tokens, side_tokens, token_weights, extra_info "
               "FROM entry_renders "
               "WHERE spec_id = {mark} AND entry_id IN ({ids})")
#: Per dataset of a spec, the entries whose data text holds a plain (not special) added token.
_ADDED_TOKENS = (
    "SELECT d.name AS dataset, u.token, u.entries FROM added_token_uses AS u JOIN datasets AS d ON d.id = u.dataset_id "
    "WHERE u.spec_id = {mark} ORDER BY d.position, u.entries DESC, u.token"
)


#: A media file's count under a spec: ``(media id, tokens, grid_t, grid_h, grid_w, frames)``.
MediaCountRow: TypeAlias = tuple[int, int, int | None, int | None, int | None, int | None]


class Specs:
    """A store's render specs, over a store handle (reads) or a write's connection (reads and
    writes; see :func:`~dataidx.store.sqlite.working_copy.access`).

    Example::

        with open_store("demo.db") as handle:
            Specs(handle).causes("default")
    """

    #: What an entry can come to under a spec, and the statuses that train.
    STATUSES = STATUSES
    TRAINING_STATUSES = TRAINING_STATUSES
    MediaCountRow = MediaCountRow
    #: What became of an entry's reasoning, worst first; the problems among them, and their words.
    REASONING = REASONING
    REASONING_PROBLEMS = REASONING_PROBLEMS
    REASONING_PROBLEM_SUMS = REASONING_PROBLEM_SUMS
    REASONING_SAID = REASONING_SAID
    # The shapes a spec's rows take in Python.
    CauseRow: TypeAlias = causes.CauseRow
    CauseTally: TypeAlias = causes.CauseTally
    tally_causes = staticmethod(causes.tally_causes)
    LengthRow: TypeAlias = rows.LengthRow
    StoredRow: TypeAlias = rows.StoredRow
    Lengths: TypeAlias = rows.SpecLengths
    EntryTokens: TypeAlias = token_files.EntryTokens
    StoredTokenFile: TypeAlias = token_files.StoredTokenFile
    PartFile = rows.PartFile
    if TYPE_CHECKING:  # a merge's parts (NumPy: loaded by read_parts only)
        PartRows: TypeAlias = PartRows
    #: A reader's fetch templates, run on its per-process handle: where entries' words lie in the
    #: token file, their sides' extras, and both at once (an export).
    FETCH_PLACES, FETCH_EXTRAS, FETCH_PLACEMENTS = _PLACES, _EXTRAS, _PLACEMENTS
    # The token files of a store's own folder: what a write names, what it may remove after.
    default_token_folder = staticmethod(token_files.default_token_folder)
    tokens_folder = staticmethod(tokens_folder)
    prune_token_files = staticmethod(token_files.prune_token_files)

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    def find(self, name: str) -> dict[str, Any] | None:
        """Spec ``name``'s row (every column of ``render_specs``), or None."""
        row = self.store.one(_SPEC, name)
        return None if row is None else dict(zip(_COLUMNS, row))

    def get(self, name: str) -> dict[str, Any]:
        """Spec ``name``'s row, or a NotFoundError listing the specs there are."""
        found = self.find(name)
        if found is None:
            raise self.store.missing("render_specs", "render spec", name, "; run dataidx render")
        return found

    def templates(self) -> list[tuple[str, str, str, str, bool]]:
        """``(name, template, template text, tokenizer, trust_remote_code)`` of every spec, oldest first."""
        return [(*row[:4], bool(row[4])) for row in self.store.all(
            "SELECT name, template, template_text, tokenizer, trust_remote_code FROM render_specs ORDER BY id")]

    def names_with_tokens(self) -> list[str]:
        """The specs whose tokens are stored, oldest first."""
        return [name for name, in self.store.all(
            "SELECT s.name FROM render_specs AS s JOIN spec_tokens AS t ON t.spec_id = s.id ORDER BY s.id")]

    def counts(self, name: str) -> list[tuple[str, str, int]]:
        """Entries per dataset and status under spec ``name``, as the store holds them now."""
        return self.store.all(causes.COUNTS, name)

    def causes(self, name: str, kind: str = "status") -> list[causes.CauseRow]:
        """Why entries of spec ``name`` do not train (``kind="status"``), or what became of their
        reasoning (``kind="reasoning"``): per cause, how many entries and the first of them."""
        return causes.render_causes(self.store, name, kind)

    def causes_in(self, name: str, mixture: str) -> list[causes.CauseRow]:
        """:meth:`causes` of the entries of the datasets ``mixture`` draws from (``dataidx compose``)."""
        return causes.mixture_causes(self.store, name, mixture)

    def reasoning_problems(self, name: str) -> list[dict[str, Any]]:
        """``{status, entries, dataset, row, cut}`` of spec ``name``: per reasoning problem that
        occurs, its base entries and the first of them, worst problem first (counted when rendered)."""
        found: list[dict[str, Any]] = [
            {"status": row.cause, "entries": row.entries, "dataset": row.dataset, "row": row.row, "cut": row.cut}
            for row in self.causes(name, "reasoning") if row.cause in REASONING_PROBLEMS]
        return sorted(found, key=lambda problem: REASONING_PROBLEMS.index(problem["status"]))

    def added_token_uses(self, spec_id: int) -> list[dict[str, Any]]:
        """``{dataset, token, entries}`` of spec ``spec_id``: per dataset, the base entries whose data
        text holds an added token that is not special (kept as its id, as in v1), most first."""
        return self.store.dicts(_ADDED_TOKENS, spec_id)

    def lengths(self, spec_id: int, column: str = "tokens") -> rows.SpecLengths:
        """Every base entry's ``column`` (``tokens`` or ``supervised_tokens``) under spec ``spec_id``
        and whether it trains, as arrays by entry id (what packing and token budgets read)."""
        from .lengths import spec_lengths  # NumPy: only readers of every length load it

        return spec_lengths(self.store, spec_id, column)

    def training_entries(self, spec_id: int) -> list[int]:
        """The base entries that train under spec ``spec_id``, in entry order."""
        return [entry for entry, in self.store.all(_TRAINING, spec_id)]

    def token_file(self, spec_id: int) -> token_files.StoredTokenFile | None:
        """The token file of spec ``spec_id``, or None when its tokens are not stored."""
        return token_files.read_token_file(self.store, spec_id)

    def token_places(self, spec_id: int, entry_ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """``(entry id, token offset, tokens)`` of ``entry_ids`` under spec ``spec_id``: a fetch
        (stamped: a store replaced meanwhile is found)."""
        return self.store.fetch(_PLACES, spec_id, json.dumps(sorted(set(entry_ids))))

    def token_extras(self, spec_id: int, entry_ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """``(entry id, side tokens, token weights)`` of ``entry_ids``: a fetch, as :meth:`token_places`."""
        return self.store.fetch(_EXTRAS, spec_id, json.dumps(sorted(set(entry_ids))))

    def stored_lengths(self, spec_id: int, first: int, last: int) -> list[tuple[int, int, int, int, str]]:
        """``(entry id, tokens, supervised, full, status)`` of entries ``first..last``: what adding
        tokens to a stored spec checks its rendering against."""
        return token_files.stored_lengths(self.store, spec_id, first, last)

    def own_token_files(self, store: str | os.PathLike[str], folder: str | None = None) -> set[str]:
        """The token files the specs name in ``folder`` (None: the store's own token folder)."""
        return token_files.own_token_files(self.store, store, folder)

    # Writes.

    @staticmethod
    def part_writer(path: Path) -> PartRowsWriter:
        """A new part file of a shard's rows at ``path`` (see :mod:`.part_rows`)."""
        from .part_rows import PartRowsWriter  # NumPy: writers only

        return PartRowsWriter(path)

    @staticmethod
    def read_parts(parts: list[rows.PartFile]) -> PartRows:
        """A merge's parts, their summaries read and summed, their rows left for :meth:`save`."""
        from .part_rows import PartRows  # NumPy: writers only

        return PartRows.read(parts)

    def save(self, spec: dict[str, Any], lengths: Iterable[list[rows.StoredRow]] | PartRows, *, entries: int,
             training_entries: int, started: float, added_uses: Mapping[tuple[int, str], int] | None = None,
             causes: Mapping[tuple[str, str], tuple[int, int]] | None = None,
             ) -> tuple[int, int, list[tuple[str, str, int]], list[Any], float]:
        """Store ``spec`` with its lengths in place of any spec of its name (see :func:`.writes.save_render_spec`)."""
        from .writes import save_render_spec  # SQLAlchemy and NumPy: writers only

        plans_removed = self.remove(spec["name"]) or 0
        spec_id, counts, found, seconds = save_render_spec(
            writable(self.store).connection, spec, lengths, entries=entries, training_entries=training_entries,
            started=started, added_uses=added_uses, causes=causes)
        return spec_id, plans_removed, counts, found, seconds

    def remove(self, name: str) -> int | None:
        """Delete spec ``name``, its lengths, the plans made from them and the orders that read it;
        the plans removed, or None when there is no such spec."""
        found = self.find(name)
        if found is None:
            return None
        plans = Plans(self.store).remove_of_spec(found["id"])
        Orders(self.store).remove_reading("spec", name)
        self.remove_rows(found["id"])
        return plans

    def move_tokenizer(self, name: str, tokenizer: str) -> None:
        """Record where spec ``name``'s tokenizer is now (the same tokenizer, moved)."""
        writable(self.store).execute("UPDATE render_specs SET tokenizer = {mark} WHERE name = {mark}", tokenizer, name)

    def save_token_file(self, spec_id: int, record: token_files.StoredTokenFile, *, seconds: float) -> None:
        """Record spec ``spec_id``'s token file, in place of any it had."""
        token_files.save_token_file(writable(self.store), spec_id, record, seconds=seconds)

    def place_entry_tokens(self, spec_id: int, placed: Iterable[list[token_files.EntryTokens]]) -> None:
        """Set where each entry's words lie, for a spec whose lengths are already stored."""
        token_files.place_entry_tokens(writable(self.store), spec_id, placed)

    def save_media(self, spec_id: int, media: Iterable[MediaCountRow]) -> None:
        """Record each media file's placeholder tokens under spec ``spec_id``, with its grid or frames."""
        writable(self.store).insert_many(
            "INSERT INTO media_renders (spec_id, media_id, tokens, grid_t, grid_h, grid_w, frames) "
            "VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark})", [(spec_id, *one) for one in media])

    def remove_rows(self, spec_id: int) -> None:
        """Delete a spec's own rows (its plans and the orders that read it are their nouns' to remove)."""
        copy = writable(self.store)
        for table in ("entry_renders", "added_token_uses", "render_causes", "render_statuses", "render_blocks",
                      "length_chunks", "spec_tokens", "media_renders"):
            copy.execute(f"DELETE FROM {table} WHERE spec_id = {{mark}}", spec_id)
        copy.execute("DELETE FROM render_specs WHERE id = {mark}", spec_id)


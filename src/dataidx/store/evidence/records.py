"""Evidence about data behind one object: runs of ``dataidx dedup`` (near duplicates) and
``dataidx decontaminate`` (benchmark leaks), each a named list of base entries with what was
found per entry, and the parameters that decided it.

A run deletes nothing: its entries stay in the base index, in every mixture drawn before it and
in its views (``duplicates``, ``contamination``); a mixture drawn with ``--exclude NAME`` draws
from the rest, and removing the run restores everything. Reads and writes are templates, so
reading loads no SQLAlchemy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...errors import UsageError
from ..handle import missing
from ..sqlite.working_copy import Access, access, writable

#: What a run found: ``near_duplicates`` (``dataidx dedup``) or ``contamination`` (``decontaminate``).
KINDS = ("near_duplicates", "contamination")
#: A duplicate: ``(entry id, its representative's entry id, verified Jaccard)``.
DuplicateRow = tuple[int, int, float]
#: A leak: ``(entry id, eval set, item index, score, span)``.
LeakRow = tuple[int, str, int, float, str]

_RUN_COLUMNS = "name, kind, params, entries, created_at, seconds"
_RUN = f"SELECT {_RUN_COLUMNS} FROM evidence_runs WHERE name = {{mark}}"
_RUNS = f"SELECT {_RUN_COLUMNS} FROM evidence_runs ORDER BY id"
_FLAGGED = {
    "near_duplicates": "SELECT x.entry_id FROM duplicate_entries AS x JOIN evidence_runs AS r ON r.id = x.run_id "
                       "WHERE r.name = {mark} ORDER BY x.entry_id",
    "contamination": "SELECT DISTINCT x.entry_id FROM leak_entries AS x JOIN evidence_runs AS r ON r.id = x.run_id "
                     "WHERE r.name = {mark} ORDER BY x.entry_id",
}

# Per dataset, what a list leaves out: rows, entries, and the tokens of those that train under a spec.
_LEFT_OUT = (
    "SELECT d.name, count(DISTINCT b.\"row\"), count(*), sum(CASE WHEN er.status IN ({{trains}}) THEN er.tokens "
    "ELSE 0 END) FROM (SELECT DISTINCT x.entry_id FROM {table} AS x JOIN evidence_runs AS r ON r.id = x.run_id "
    "WHERE r.name = {{mark}}) AS listed JOIN base_entries AS b ON b.id = listed.entry_id "
    "JOIN datasets AS d ON d.id = b.dataset_id LEFT JOIN entry_renders AS er ON er.entry_id = listed.entry_id "
    "AND er.spec_id = (SELECT id FROM render_specs WHERE name = {{mark}}) GROUP BY d.id, d.name ORDER BY d.position"
)
_TABLES = {"near_duplicates": "duplicate_entries", "contamination": "leak_entries"}


@dataclass(frozen=True, kw_only=True)
class StoredRun:
    """One run as ``info`` shows it: its name, kind, parameters, entries flagged, when and how long."""

    name: str
    kind: str
    params: dict[str, Any]
    entries: int
    created_at: str
    seconds: float


class Evidence:
    """Runs of near-duplicate and leak detection, over a store handle (reads) or a writer's
    connection (reads and writes; see :func:`~dataidx.store.sqlite.working_copy.writable`).

    Example::

        with open_store("demo.db") as handle:
            Evidence(handle).flagged("dups")
    """

    KINDS = KINDS
    DuplicateRow = DuplicateRow
    LeakRow = LeakRow
    StoredRun = StoredRun

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    def runs(self) -> list[StoredRun]:
        """Every run, oldest first."""
        return [_run(row) for row in self.store.all(_RUNS)]

    def find(self, name: str) -> StoredRun | None:
        found = self.store.one(_RUN, name)
        return _run(found) if found is not None else None

    def get(self, name: str) -> StoredRun:
        """Run ``name``, or a one-line error naming the runs there are."""
        found = self.find(name)
        if found is None:
            raise missing("evidence list", name, store=self.store.name, names=[run.name for run in self.runs()])
        return found

    def flagged(self, names: Sequence[str]) -> list[int]:
        """The base entries runs ``names`` flag together, sorted: what ``--exclude`` leaves out."""
        entries: set[int] = set()
        for name in names:
            run = self.get(name)
            entries.update(entry for entry, in self.store.all(_FLAGGED[run.kind], name))
        return sorted(entries)

    def left_out_said(self, mixture: str, spec: str | None = None) -> list[str]:
        """A line per list ``mixture`` was drawn without and dataset it touches: the rows and
        entries it left out, and with ``spec`` their tokens (what ``compose`` says)."""
        found = self.store.one("SELECT excludes FROM mixtures WHERE name = {mark}", mixture)
        lines = []
        for name in json.loads(found[0]) if found and found[0] else []:
            run = self.find(name)
            if run is None:
                lines.append(f"drawn without list '{name}', removed since")
                continue
            for dataset, rows, entries, tokens in self.store.all(_LEFT_OUT.format(table=_TABLES[run.kind]), name,
                                                                 spec):
                spent = f", {tokens:,} tokens under spec '{spec}'" if spec else ""
                lines.append(f"drawn without list '{name}' ({run.kind}): {dataset} {rows:,} rows, {entries:,} "
                             f"entries{spent}")
        return lines

    def save_duplicates(self, name: str, params: dict[str, Any], rows: Sequence[DuplicateRow], *,
                        seconds: float) -> StoredRun:
        """Store near-duplicate run ``name``: each duplicate entry, its representative and Jaccard."""
        run_id, run = self._add_run(name, "near_duplicates", params, len(rows), seconds)
        writable(self.store).insert_many(
            "INSERT INTO duplicate_entries (run_id, entry_id, representative, jaccard) VALUES ({mark}, {mark}, "
            "{mark}, {mark})", [(run_id, *row) for row in rows])
        return run

    def save_leaks(self, name: str, params: dict[str, Any], rows: Sequence[LeakRow], *, seconds: float) -> StoredRun:
        """Store decontamination run ``name``: each leaking entry, per eval set its best item."""
        run_id, run = self._add_run(name, "contamination", params, len({row[0] for row in rows}), seconds)
        writable(self.store).insert_many(
            "INSERT INTO leak_entries (run_id, entry_id, eval_set, item, score, span) VALUES ({mark}, {mark}, "
            "{mark}, {mark}, {mark}, {mark})", [(run_id, *row) for row in rows])
        return run

    def remove(self, name: str) -> StoredRun:
        """Remove run ``name`` and what it found: its entries are no longer left out anywhere."""
        run = self.get(name)
        copy = writable(self.store)
        run_id = copy.value("SELECT id FROM evidence_runs WHERE name = {mark}", name)
        for table in ("duplicate_entries", "leak_entries"):
            copy.execute(f"DELETE FROM {table} WHERE run_id = {{mark}}", run_id)
        copy.execute("DELETE FROM evidence_runs WHERE id = {mark}", run_id)
        return run

    def refuse_taken(self, name: str) -> None:
        """A one-line UsageError when a list ``name`` is there already (before a run's work, and at its write)."""
        if self.find(name) is not None:
            raise UsageError(f"{self.store.name}: a list '{name}' is there already (dataidx evidence --remove {name} "
                             "removes it); give another --name")

    def _add_run(self, name: str, kind: str, params: dict[str, Any], entries: int,
                 seconds: float) -> tuple[int, StoredRun]:
        self.refuse_taken(name)
        copy = writable(self.store)
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        text = json.dumps(params, sort_keys=True)
        run_id = copy.insert("INSERT INTO evidence_runs (name, kind, params, entries, created_at, seconds) "
                             "VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark})",
                             name, kind, text, entries, created, seconds)
        return run_id, StoredRun(name=name, kind=kind, params=params, entries=entries, created_at=created,
                                 seconds=seconds)


def _run(row: Sequence[Any]) -> StoredRun:
    name, kind, params, entries, created_at, seconds = row
    return StoredRun(name=name, kind=kind, params=json.loads(params), entries=entries, created_at=created_at,
                     seconds=seconds)

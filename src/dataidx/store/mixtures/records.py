"""Mixtures behind one object: a store's seeded draws of its base index, read by every reader of
a mixture and written by ``dataidx build`` and ``dataidx mix`` (:mod:`dataidx.index`).

Reads and small writes are templates through a handle or a writer's working copy, so opening a
mixture loads neither SQLAlchemy nor NumPy; its positions and draw summaries, written and read
in bulk, are :mod:`.positions` and :mod:`.draws`, imported when a method needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from ...errors import StaleStoreError
from ..specs.reasoning import REASONING_PROBLEMS
from ..sqlite.working_copy import Access, access, writable
from .epochs import StoredMixture, check_epoch, served_epoch, serving

if TYPE_CHECKING:
    import numpy as np

    from . import draws
    from .draws import DrawSummary
    from .positions import PositionWriter


#: The keys of each row :func:`dataidx.store.composition` gives, per dataset of a mixture.
COMPOSITION_COLUMNS = ("dataset", "entries", "share", "base_entries", "distinct_entries", "distinct_rows",
                       "max_repeats", "coverage")
#: Added with a render spec: of the entries drawn, those that train, and their tokens.
TOKEN_COLUMNS = ("training_entries", "tokens", "supervised_tokens", "share_of_tokens")
#: Also with a render spec: of those training entries, the ones with reasoning and without (and
#: their tokens), and the reasoning problems among them (``entry_renders.reasoning``).
REASONING_COLUMNS = ("reasoning_entries", "reasoning_tokens", "plain_entries", "plain_tokens",
                     *(f"reasoning_{problem}" for problem in REASONING_PROBLEMS))

#: The evaluation mixture's name: its rows are held out of every other mixture.
HELD_OUT = "eval"
# The rows (all cuts together) a mixture's positions hold: of one dataset, and counted over all.
_HELD_ROWS_FROM = """FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
WHERE m.name = {mark}"""
_HELD_OUT_ROWS = f'SELECT DISTINCT b."row" {_HELD_ROWS_FROM} AND b.dataset_id = {{mark}} ORDER BY b."row"'
_HELD_OUT_COUNT = f'SELECT count(*) FROM (SELECT DISTINCT b.dataset_id, b."row" {_HELD_ROWS_FROM}) AS held'
# Per other mixture, its positions whose row the held-out mixture holds, and the first such row.
_HELD_OUT_DRAWN = f"""SELECT m.name, count(*), min(b.id)
FROM mixture_positions AS p
JOIN mixtures AS m ON m.id = p.mixture_id
JOIN base_entries AS b ON b.id = p.entry_id
JOIN (SELECT DISTINCT b.dataset_id, b."row" {_HELD_ROWS_FROM}) AS h ON h.dataset_id = b.dataset_id AND h."row" = b."row"
WHERE m.name <> {{mark}}
GROUP BY m.name ORDER BY m.name"""
_ENTRY_ROW = ('SELECT d.name, b."row" FROM base_entries AS b JOIN datasets AS d ON d.id = b.dataset_id '
              "WHERE b.id = {mark}")

#: A mixture ``m`` one of whose datasets was drawn by a token budget.
_DRAWN_BY_BUDGETS = """EXISTS (SELECT 1 FROM mixture_datasets AS md WHERE md.mixture_id = m.id
              AND (md.token_budget IS NOT NULL OR md.supervised_token_budget IS NOT NULL))"""
# Mixtures drawn by token budgets whose render spec is gone or holds other lengths than those
# drawn by: of every mixture, of one, or of those drawn under one spec.
_STALE_BUDGETS = f"""
SELECT m.name, m.spec, s.fingerprint IS NULL FROM mixtures AS m LEFT JOIN render_specs AS s ON s.name = m.spec
WHERE m.spec IS NOT NULL AND (s.fingerprint IS NULL OR s.fingerprint <> m.spec_fingerprint)
  AND {_DRAWN_BY_BUDGETS}"""
#: Mixtures drawn by token budgets under a spec's lengths as they are (the stale ones' complement).
_BUDGETS_UNDER = f"""
SELECT m.name FROM mixtures AS m JOIN render_specs AS s ON s.name = m.spec
WHERE s.name = {{mark}} AND s.fingerprint = m.spec_fingerprint AND {_DRAWN_BY_BUDGETS}
ORDER BY m.id"""
_STALE_OF = {"all": _STALE_BUDGETS + " ORDER BY m.id",
             "mixture": _STALE_BUDGETS + " AND m.name = {mark} ORDER BY m.id",
             "spec": _STALE_BUDGETS + " AND m.spec = {mark} ORDER BY m.id"}


# A reader's fetches of positions (stamped: a store replaced meanwhile is found). A position inside
# a run is an entry id by arithmetic; any other is a mixture_entries rowid.
_POSITION_ONE = (
    "SELECT {stamped}me.id, b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id = {mark}"
)
_POSITION_MANY = (
    "SELECT {stamped}me.id, b.dataset_id, b.row, b.cut FROM mixture_entries AS me "
    "JOIN base_entries AS b ON b.id = me.entry_id WHERE me.id IN ({ids})"
)
_EXPLICIT_ENTRIES = "SELECT {stamped}id, entry_id FROM mixture_entries WHERE id IN ({ids})"
#: The explicit positions of a range that hold any of some base entries (a scan of the range).
_EXPLICIT_HOLDING = "SELECT {stamped}id FROM mixture_entries WHERE id BETWEEN {mark} AND {mark} AND entry_id IN ({ids})"


class Mixtures:
    """A store's mixtures, over a store handle (reads) or a write's connection (reads and writes;
    see :func:`~dataidx.store.sqlite.working_copy.access`).

    Example::

        with open_store("demo.db") as handle:
            Mixtures(handle).get("default", epoch=1).positions
    """

    #: A reader's fetch templates, run on its per-process handle: a position's entry (one, or many),
    #: explicit positions' entries, and the explicit positions of a range holding some entries.
    FETCH_POSITION, FETCH_POSITIONS, FETCH_EXPLICIT = _POSITION_ONE, _POSITION_MANY, _EXPLICIT_ENTRIES
    FETCH_HOLDING = _EXPLICIT_HOLDING

    #: What a composition row holds (see :func:`dataidx.store.composition`).
    COMPOSITION_COLUMNS, TOKEN_COLUMNS, REASONING_COLUMNS = COMPOSITION_COLUMNS, TOKEN_COLUMNS, REASONING_COLUMNS
    #: One dataset's draw over every epoch, as the bulk writer counts it (:mod:`.draws`).
    DrawSummary: TypeAlias = "draws.DrawSummary"

    #: The evaluation mixture, held out of every other (:meth:`held_out_rows`).
    HELD_OUT = HELD_OUT

    check_epoch = staticmethod(check_epoch)
    served_epoch = staticmethod(served_epoch)
    serving = staticmethod(serving)

    def __init__(self, store: Access) -> None:
        self.store = access(store)

    def get(self, name: str, epoch: int = 0) -> StoredMixture:
        """Epoch ``epoch`` of mixture ``name``, or a NotFoundError listing the mixtures there are
        (also for an epoch it does not have); a StaleStoreError if its token budgets were met under
        lengths the store no longer holds."""
        row = self.store.one("SELECT id, name FROM mixtures WHERE name = {mark}", name)
        if row is None:
            raise self.store.missing("mixtures", "mixture", name)
        stale = self.stale(mixture=name)
        if stale:
            raise StaleStoreError(f"{self.store.name}: {stale[name]}")
        stretches = tuple(self.epochs_of(row[0]))
        return StoredMixture(id=row[0], name=row[1], start=0, positions=0, stretches=stretches).at(epoch)

    def epochs_of(self, mixture_id: int) -> list[tuple[int, int]]:
        """``(start, positions)`` of each epoch of a mixture, in epoch order."""
        return self.store.all("SELECT start, entries FROM mixture_epochs WHERE mixture_id = {mark} ORDER BY epoch",
                              mixture_id)

    def epoch_rows(self, mixture_id: int) -> list[tuple[int, int, int]]:
        """``(epoch, seed, positions)`` of each epoch of a mixture, in epoch order: what the report shows."""
        return self.store.all("SELECT epoch, seed, entries FROM mixture_epochs WHERE mixture_id = {mark} "
                              "ORDER BY epoch", mixture_id)

    def epoch_draws(self, mixture_id: int, first: int, last: int) -> list[tuple]:
        """``(epoch, dataset, seed, entries, distinct_rows, training_entries, tokens, supervised_tokens)``
        of each dataset's draw in epochs ``first..last``, in epoch then config order (tokens only
        for a mixture drawn under a spec)."""
        return self.store.all("SELECT ed.epoch, d.name, ed.seed, ed.entries, ed.distinct_rows, ed.training_entries, "
                              "ed.tokens, ed.supervised_tokens FROM epoch_datasets AS ed JOIN datasets AS d "
                              "ON d.id = ed.dataset_id WHERE ed.mixture_id = {mark} AND ed.epoch BETWEEN {mark} "
                              "AND {mark} ORDER BY ed.epoch, d.position", mixture_id, first, last)

    def runs(self, mixture_id: int) -> list[tuple[int, int, int]]:
        """``(start, first entry, length)`` of each run of a mixture's positions, in position order:
        a handful per dataset, which a reader keeps in memory."""
        return self.store.all("SELECT start, first_entry, length FROM mixture_runs WHERE mixture_id = {mark} "
                              "ORDER BY start", mixture_id)

    def pair_datasets(self, mixture_id: int) -> list[str]:
        """The datasets of preference pairs a mixture draws from, in config order."""
        return [name for name, in self.store.all(
            "SELECT d.name FROM mixture_datasets AS md JOIN datasets AS d ON d.id = md.dataset_id "
            "WHERE md.mixture_id = {mark} AND md.entries > 0 AND d.converter = 'pair' ORDER BY d.position",
            mixture_id)]

    def drawn_by_budgets_under(self, spec: str) -> list[str]:
        """The mixtures drawn by token budgets under spec ``spec``'s lengths as they are now."""
        return [name for name, in self.store.all(_BUDGETS_UNDER, spec)]

    def epoch_count(self, name: str) -> int:
        """How many epochs mixture ``name`` holds."""
        return self.get(name).epochs

    def stale(self, *, mixture: str | None = None, spec: str | None = None) -> dict[str, str]:
        """Mixture name -> why it cannot be served: its token budgets were met under lengths its
        render spec no longer holds (the spec was rendered again, or removed). ``mixture`` or
        ``spec`` narrows the search."""
        which, parameters = ("mixture", (mixture,)) if mixture is not None else \
            ("spec", (spec,)) if spec is not None else ("all", ())
        store, found = self.store.name, {}
        for name, under, removed in self.store.all(_STALE_OF[which], *parameters):
            change = "which was removed since" if removed else "which was rendered again since, with other lengths"
            found[name] = (f"mixture '{name}' was drawn by token budgets under render spec '{under}', {change}: its "
                           "budgets count lengths the store no longer holds; draw it again with dataidx "
                           f"remove-mixture {store} {name}, then dataidx mix {store} CONFIG --name {name} "
                           f"--spec {under}")
        return found

    def entries_of(self, mixture: StoredMixture) -> np.ndarray:
        """Base entry id of every position of ``mixture`` (of the epoch it was read for), in
        position order (4-byte ids while they fit)."""
        from .positions import position_entries  # NumPy: only readers of every position load it

        return position_entries(self.store, mixture)

    def held_out_rows(self, dataset_id: int) -> list[int]:
        """The rows of dataset ``dataset_id`` that mixture :data:`HELD_OUT` holds: evaluation rows,
        which every other mixture leaves out (all their cuts), so no eval row is trained on."""
        return [row for row, in self.store.all(_HELD_OUT_ROWS, HELD_OUT, dataset_id)]

    def held_out_row_count(self) -> int:
        """How many rows, over all datasets, mixture :data:`HELD_OUT` holds (0 with none)."""
        return self.store.value(_HELD_OUT_COUNT, HELD_OUT) or 0

    def held_out_problems(self) -> list[str]:
        """``dataidx verify``'s check that no mixture but :data:`HELD_OUT` draws one of its rows (any
        cut of it), counted in SQL over every position: a store altered after its build is named."""
        if not self.exists(HELD_OUT):
            return []
        problems = []
        for name, count, entry in self.store.all(_HELD_OUT_DRAWN, HELD_OUT, HELD_OUT):
            dataset, row = self.store.all(_ENTRY_ROW, entry)[0]
            positions = f"{count:,} position{'s' * (count != 1)}"
            problems.append(f"mixture '{name}' draws {positions} of rows held out for evaluation in mixture "
                            f"'{HELD_OUT}' (e.g. dataset '{dataset}' row {row}); the store was altered: rebuild it")
        return problems

    # Writes: a mixture is drawn inside one write (dataidx.index's MixtureWriter).

    def exists(self, name: str) -> bool:
        return self.store.one("SELECT id FROM mixtures WHERE name = {mark}", name) is not None

    def next_start(self) -> int:
        """The first global position after every stored mixture's: position space is shared."""
        return self.store.value("SELECT max(start + entries) FROM mixtures") or 1

    def create(self, **columns: Any) -> int:
        """A new ``mixtures`` row (its columns by name); its id."""
        return writable(self.store).insert_row("mixtures", columns)

    def add_epoch(self, **columns: Any) -> None:
        """An epoch's row: its seed and stretch of positions."""
        writable(self.store).insert_row("mixture_epochs", columns)

    def add_epoch_dataset(self, **columns: Any) -> None:
        """One dataset's draw in one epoch."""
        writable(self.store).insert_row("epoch_datasets", columns)

    def add_dataset(self, **columns: Any) -> None:
        """One dataset's draw over every epoch: what was asked and what came out."""
        writable(self.store).insert_row("mixture_datasets", columns)

    def set_entries(self, mixture_id: int, entries: int) -> None:
        writable(self.store).execute("UPDATE mixtures SET entries = {mark} WHERE id = {mark}", entries, mixture_id)

    def position_writer(self, mixture_id: int, first_id: int) -> PositionWriter:
        """Where a draw's positions go, a chunk or a run at a time, from global position ``first_id``."""
        from .positions import PositionWriter  # NumPy and SQLAlchemy: writers only

        return PositionWriter(writable(self.store).connection, mixture_id, first_id)

    def summarise_draw(self, first_entry: int, counts: np.ndarray, rows: int) -> DrawSummary:
        """The summary of one dataset's draw (see :func:`.draws.summarise_draw`)."""
        from .draws import summarise_draw  # NumPy and SQLAlchemy: writers only

        return summarise_draw(writable(self.store).connection, first_entry, counts, rows)

    def draw_counts(self, first_entry: int, counts: np.ndarray, rows: int) -> tuple[int, int, int]:
        """``(distinct entries, distinct rows, largest repeat count)`` of one epoch's draw."""
        from .draws import draw_counts  # NumPy and SQLAlchemy: writers only

        return draw_counts(writable(self.store).connection, first_entry, counts, rows)

    def record_draw_summary(self, mixture_id: int, dataset_id: int, first_entry: int, counts: np.ndarray,
                            summary: DrawSummary) -> None:
        """A draw's spans and repeat rows (see :func:`.draws.insert_draw_summary`)."""
        from .draws import insert_draw_summary  # NumPy and SQLAlchemy: writers only

        insert_draw_summary(writable(self.store).connection, mixture_id, dataset_id, first_entry, counts, summary)

    def remove_rows(self, mixture_id: int, start: int, entries: int) -> None:
        """Delete a mixture's own rows (its plans, skip lists and orders are their nouns' to remove).
        Positions are a rowid range, so their delete is a range scan, not a table scan."""
        copy = writable(self.store)
        copy.execute("DELETE FROM mixture_entries WHERE id BETWEEN {mark} AND {mark}", start, start + entries - 1)
        for table in ("mixture_runs", "mixture_spans", "repeat_counts", "repeat_rows", "mixture_datasets",
                      "epoch_datasets", "mixture_epochs"):
            copy.execute(f"DELETE FROM {table} WHERE mixture_id = {{mark}}", mixture_id)
        copy.execute("DELETE FROM mixtures WHERE id = {mark}", mixture_id)

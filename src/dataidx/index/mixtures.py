"""Write a named mixture of a store's base index: per-dataset seeded draws, positions by rowid.

Only the stored base index is read (dataset ids, first entry, entry counts) and, for token
budgets, a render spec's stored lengths, never the sources, so a mixture can be drawn again or
added later with the source files gone. A mixture of several epochs stores them one after
another, each drawn with its own seed (:func:`~.sampling.epoch_seed`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
from sqlalchemy import Connection

from .._version import __version__
from ..errors import UsageError
from ..spec import Config
from ..store import Mixtures
from .budgets import Lengths, budget_draw
from .sampling import Draw, OffsetRange, check_sampling, derive_seed, draw, epoch_seed, requested_count
from .token_counts import MixtureLengths


@dataclass(kw_only=True)
class MixtureSummary:
    name: str
    seed: int
    sampling: str
    entries: int
    #: entries per dataset, over all epochs
    datasets: dict[str, int] = field(default_factory=dict)
    epochs: int = 1
    spec: str | None = None
    #: per epoch, per dataset: the tokens of its training entries under ``spec``
    tokens: list[dict[str, int]] = field(default_factory=list)
    #: budgeted datasets a build took whole, having no spec to count their tokens with
    taken_whole: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class _Total:
    """One dataset's draws summed over epochs, for its ``mixture_datasets`` row."""

    name: str
    first_entry: int
    rows: int
    counts: np.ndarray
    #: positions drawn, over all epochs
    drawn: int = 0


class MixtureWriter:
    """Appends one mixture to a store, dataset by dataset and epoch by epoch, positions in config
    order within an epoch.

    A dataset's draw needs only its id, first entry and entry count (and, for a budget, the
    spec's lengths), so the build can draw each dataset as soon as it is written, while it
    prepares the next one. With ``lengths`` a budget draws by tokens and every draw records the
    tokens it took; without them a budget is an error, or with ``whole_budgets`` (the build,
    which renders nothing yet) the dataset is taken whole.
    """

    def __init__(self, connection: Connection, config: Config, name: str, *, seed: int, sampling: str,
                 epochs: int = 1, lengths: MixtureLengths | None = None, whole_budgets: bool = False,
                 whole: bool = False, excludes: Sequence[str] = ()) -> None:
        check_sampling(sampling)
        if not -(2**63) <= seed < 2**63:
            raise UsageError(f"seed {seed} does not fit in 64 bits")
        if not 1 <= epochs <= 10_000:
            raise UsageError(f"epochs must be from 1 to 10000, got {epochs}")
        _check_budgets(config, sampling, lengths, whole_budgets)
        self.mixtures = Mixtures(connection)
        if self.mixtures.exists(name):
            raise UsageError(f"mixture '{name}' already exists; remove it first or choose another --name")
        self.config = config
        self.datasets = {dataset.name: dataset for dataset in config.datasets}
        self.lengths, self.whole_budgets, self.whole = lengths, whole_budgets, whole
        # Position space is shared: each mixture takes the stretch after the last one.
        self.start = self.position = self.epoch_start = self.mixtures.next_start()
        self.epoch = 0
        self.summary = MixtureSummary(name=name, seed=seed, sampling=sampling, entries=0, epochs=epochs,
                                      spec=None if lengths is None else lengths.spec, tokens=[{}])
        self.totals: dict[int, _Total] = {}
        self.mixture_id = self.mixtures.create(
            name=name, seed=seed, sampling=sampling, start=self.start, entries=0, config_sha256=config.sha256,
            config_text=config.text, dataidx_version=__version__, epochs=epochs,
            spec=None if lengths is None else lengths.spec,
            spec_fingerprint=None if lengths is None else lengths.fingerprint,
            excludes=json.dumps(list(excludes)) if excludes else None,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    def add(self, dataset_id: int, name: str, *, first_entry: int, entries: int, rows: int,
            keep: np.ndarray | None = None) -> None:
        """Draw dataset ``name`` (entries ``first_entry ...`` from ``rows`` rows that were not
        rejected) into the current epoch, by its budget or by its size and weight; with ``keep``,
        from those entry offsets alone (the rest are held out, or are the hold-out's complement)."""
        summary = self.summary
        dataset_seed = derive_seed(epoch_seed(summary.seed, self.epoch), name)
        chosen = self._draw(name, first_entry, entries, dataset_seed, keep)
        positions = self.mixtures.position_writer(self.mixture_id, self.position)
        for chunk in chosen.chunks():
            if keep is not None:
                ranged = isinstance(chunk, OffsetRange)
                offsets = keep[chunk.start : chunk.start + chunk.length] if ranged else keep[chunk]
                positions.add_ids(offsets + first_entry)
            elif isinstance(chunk, OffsetRange):
                positions.add_run(first_entry + chunk.start, chunk.length)
            else:
                positions.add_ids(chunk + first_entry)
        positions.close()
        drawn = len(chosen)
        self.position += drawn
        counts = chosen.counts()
        if keep is not None:  # counted over every entry of the dataset, held out ones never drawn
            counts = np.zeros(entries, dtype=counts.dtype)
            counts[keep] = chosen.counts()
        # One epoch: its counts are the mixture's, and one pass counts the epoch's row and the summary.
        counted = self.mixtures.summarise_draw(first_entry, counts, rows) if summary.epochs == 1 else None
        distinct_entries, distinct_rows, max_repeats = (
            self.mixtures.draw_counts(first_entry, counts, rows) if counted is None
            else (counted.distinct_entries, counted.distinct_rows, counted.max_repeats))
        spent = {} if self.lengths is None else self.lengths.spent(first_entry, counts)
        self.mixtures.add_epoch_dataset(
            mixture_id=self.mixture_id, epoch=self.epoch, dataset_id=dataset_id, seed=dataset_seed, entries=drawn,
            distinct_entries=distinct_entries, distinct_rows=distinct_rows, max_repeats=max_repeats, **spent,
        )
        if spent:
            summary.tokens[self.epoch][name] = spent["tokens"]
        summary.datasets[name] = summary.datasets.get(name, 0) + drawn
        if counted is not None:
            self._insert_dataset(dataset_id, name, base_entries=entries, drawn=drawn, counted=counted,
                                 seed=dataset_seed)
            self.mixtures.record_draw_summary(self.mixture_id, dataset_id, first_entry, counts, counted)
            return
        total = self.totals.setdefault(dataset_id, _Total(name=name, first_entry=first_entry, rows=rows,
                                                                counts=np.zeros(entries, dtype=np.int64)))
        total.counts += counts
        total.drawn += drawn

    def _draw(self, name: str, first_entry: int, entries: int, seed: int, keep: np.ndarray | None = None) -> Draw:
        """A draw over the dataset's entries, or over offsets ``keep`` of them alone (its draw's
        offsets then index ``keep``): a budget counts the kept entries' tokens only."""
        dataset = self.datasets[name]
        kept = entries if keep is None else len(keep)
        if self.whole:  # the hold-out: every entry it keeps, once
            return draw(kept, None, None, "exact", seed)
        if dataset.budget is None:
            _check_reach(self.config.origin, name, size=dataset.size, weight=dataset.weight, entries=kept)
            return draw(kept, dataset.size, dataset.weight, self.summary.sampling, seed)
        if self.lengths is None:  # a build: whole_budgets, checked when the writer was made
            if name not in self.summary.taken_whole:
                self.summary.taken_whole.append(name)
            return draw(kept, None, None, self.summary.sampling, seed)
        key, budget = dataset.budget
        lengths = self.lengths.of(key, first_entry, entries)
        if keep is not None:  # held-out rows spend no budget: they are never drawn
            lengths = Lengths(lengths.lengths[keep], lengths.trains[keep])
        reach = int(lengths.lengths[lengths.eligible()].sum(dtype=np.int64))
        if budget > MAX_PASSES * max(reach, 1):
            raise UsageError(f"{self.config.origin}: dataset '{name}': key '{key}' asks for {budget:,} tokens of its "
                             f"{reach:,} that train, more than {MAX_PASSES} times over; a budget counts tokens of "
                             "the whole dataset drawn, not per entry")
        return budget_draw(lengths, budget, seed, dataset=name, key=key)

    def _close_epoch(self) -> None:
        self.mixtures.add_epoch(
            mixture_id=self.mixture_id, epoch=self.epoch, seed=epoch_seed(self.summary.seed, self.epoch),
            start=self.epoch_start, entries=self.position - self.epoch_start,
        )

    def next_epoch(self) -> None:
        """Close the current epoch: later :meth:`add` calls draw the next one, with its own seed."""
        self._close_epoch()
        self.epoch += 1
        self.epoch_start = self.position
        self.summary.tokens.append({})

    def _insert_dataset(self, dataset_id: int, name: str, *, base_entries: int, drawn: int,
                        counted: Mixtures.DrawSummary, seed: int) -> None:
        dataset = self.datasets[name]
        budget = dict.fromkeys(("token_budget", "supervised_token_budget"))
        if dataset.budget is not None:
            budget["token_budget" if dataset.budget[0] == "tokens" else "supervised_token_budget"] = dataset.budget[1]
        requested = None if dataset.budget is not None else requested_count(base_entries, dataset.size, dataset.weight)
        size, weight = dataset.size, dataset.weight
        if self.whole:  # the hold-out asks for its rows' entries, not the config's sizes
            size, weight, requested = None, None, drawn
            budget = dict.fromkeys(budget)
        self.mixtures.add_dataset(
            mixture_id=self.mixture_id, dataset_id=dataset_id, seed=seed, size=size, weight=weight,
            base_entries=base_entries, requested=requested, entries=drawn, distinct_entries=counted.distinct_entries,
            distinct_rows=counted.distinct_rows, max_repeats=counted.max_repeats, **budget,
        )

    def finish(self) -> MixtureSummary:
        """Close the last epoch and record each dataset's draws over all epochs."""
        self._close_epoch()
        if self.epoch + 1 != self.summary.epochs:
            raise UsageError(f"mixture '{self.summary.name}' was to have {self.summary.epochs} epochs, "
                             f"{self.epoch + 1} were drawn")
        for dataset_id, total in self.totals.items():
            counted = self.mixtures.summarise_draw(total.first_entry, total.counts, total.rows)
            self._insert_dataset(dataset_id, total.name, base_entries=len(total.counts), drawn=total.drawn,
                                 counted=counted, seed=derive_seed(self.summary.seed, total.name))
            self.mixtures.record_draw_summary(self.mixture_id, dataset_id, total.first_entry, total.counts, counted)
        self.summary.entries = self.position - self.start
        self.mixtures.set_entries(self.mixture_id, self.summary.entries)
        return self.summary


#: The most times over a mixture may take one dataset's entries (or tokens): more is a typo, such
#: as a token count given as ``size``, and would fill memory and disk rather than fail.
MAX_PASSES = 1000


def _check_reach(origin: str, name: str, *, size: int | None, weight: float | None, entries: int) -> None:
    """Refuse a ``size``/``weight`` asking for more than :data:`MAX_PASSES` times a dataset's entries."""
    most = MAX_PASSES * max(entries, 1)
    asked = float(entries if size is None else size) * (1.0 if weight is None else weight)
    if asked <= min(most, 2**31 - 1):
        return
    key, value = ("size", size) if size is not None and size > most else ("weight", weight)
    raise UsageError(f"{origin}: dataset '{name}': key '{key}' ({value:,}) asks for {asked:,.0f} entries of its "
                     f"{entries:,}, more than {MAX_PASSES} times over (or 2^31 entries): size and weight count "
                     "entries, not tokens (a token budget is tokens: N or supervised_tokens: N)")


def _check_budgets(config: Config, sampling: str, lengths: MixtureLengths | None, whole_budgets: bool) -> None:
    budgeted = config.budgeted
    if not budgeted:
        return
    first = budgeted[0]
    assert first.budget is not None  # Config.budgeted holds the datasets that have one
    where = f"{config.origin}: dataset '{first.name}': key '{first.budget[0]}'"
    if lengths is None and not whole_budgets:
        raise UsageError(f"{where} is a token budget, counted under a render spec: give the mixture one with "
                         "--spec SPEC (one that dataidx render stored)")
    if sampling != "exact":
        raise UsageError(f"{where}: token budgets draw exactly (distinct entries, whole passes); "
                         f"--sampling {sampling} does not apply to them")

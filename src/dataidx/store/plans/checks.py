"""``dataidx verify`` of packing plans: every plan recounted from its members, the spec's lengths
and its mixture's positions, and compared with what it records and what its readers serve.

A reader serves a pack as its members say (:mod:`dataidx.pack.served` checks only what costs
nothing per fetch), so an edited plan would train in silence: a member moved to a sibling cut, a
pack past its capacity, an entry that does not train. Here, per epoch: the packs chain their
members end to end; each member is the entry at its position, the positions that train are packed
once each and only they; each member trains under the spec; a member joined to the next is
followed, in its pack, by the next cut of its conversation, and only in a plan that merges cuts;
each pack holds the tokens its members make, at most the capacity; the epoch and plan rows add
up. Members are read as arrays (:func:`dataidx.store.positions.key_chunks`), a million at a time, and checked
with NumPy: per member, two integers of text read and a few bytes held, no Python object.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from ...errors import StoreError
from ..base.records import Datasets
from ..handle import StoreHandle
from ..mixtures.records import Mixtures, StoredMixture
from ..specs.lengths import key_chunks, rendered_lengths
from ..specs.rows import SpecLengths

_PLANS = ("SELECT p.id, p.name, p.spec_id, s.name, p.mixture_id, m.name, p.capacity, p.merge_cuts, p.packs, "
          "p.entries, p.tokens, p.left_out, p.epochs FROM packing_plans AS p "
          "JOIN render_specs AS s ON s.id = p.spec_id JOIN mixtures AS m ON m.id = p.mixture_id")
# The packs of a plan: numbered 0.. without gaps, each holding at least one member and each
# starting where the one before ends (what the writer writes), and the plan's members counted.
_PACKS = ("SELECT count(*), coalesce(min(pack), 0), coalesce(max(pack), -1), coalesce(min(members), 1), "
          "coalesce(sum(members), 0), coalesce(sum(CASE WHEN first_member <> expected THEN 1 ELSE 0 END), 0), "
          "min(CASE WHEN expected IS NULL THEN first_member END), "
          "(SELECT count(*) FROM packed_entries WHERE plan_id = {mark}) "
          "FROM (SELECT pack, first_member, members, lag(first_member + members) OVER (ORDER BY pack) AS expected "
          "FROM packs WHERE plan_id = {mark}) AS chained")
_EPOCHS = ("SELECT epoch, first_pack, packs, entries, tokens, left_out FROM plan_epochs WHERE plan_id = {mark} "
           "ORDER BY epoch")
#: What ``packing_plans.merge_cuts`` holds: ``no``, or one of ``dataidx.pack.merging.MODES``.
_MERGE_CUTS = ("no", "chains", "trees")
# Each read as (value, where it is one a pack writes): anything else would spill into other bits.
_PACK_MEMBERS = ("CAST(members AS bigint)", "members BETWEEN 1 AND 4294967295")
_PACK_TOKENS = ("CAST(tokens AS bigint)", f"tokens BETWEEN 0 AND {2**40}")
_MEMBER_ENTRIES = ("(CAST(entry_id AS bigint) << 1) | (CASE WHEN joined THEN 1 ELSE 0 END)",
                   "entry_id BETWEEN 0 AND 4294967295")
_MEMBER_POSITIONS = ("CAST(position AS bigint)", "position BETWEEN 0 AND 4294967295")


@dataclass(frozen=True, kw_only=True)
class _Plan:
    id: int
    name: str
    spec_id: int
    spec: str
    mixture_id: int
    mixture: str
    capacity: int
    merge_cuts: str


def plan_problems(handle: StoreHandle, spec_id: int | None = None) -> list[str]:
    """One line per way a packing plan (of spec ``spec_id``, or every one) differs from its recount."""
    problems: list[str] = []
    lengths: dict[int, SpecLengths] = {}
    starts: list[np.ndarray] = []  # the base entries that begin a row, read once for every merging plan
    rows = handle.all(_PLANS + (" WHERE p.spec_id = {mark}" if spec_id is not None else "") + " ORDER BY p.id",
                      *([spec_id] if spec_id is not None else []))
    for row in rows:
        plan = _Plan(id=row[0], name=row[1], spec_id=row[2], spec=row[3], mixture_id=row[4], mixture=row[5],
                     capacity=row[6], merge_cuts=row[7])
        said = f"plan '{plan.name}'"
        try:
            found = _plan_problems(handle, plan, row[8:], lengths, starts)
        except StoreError as exc:  # a value no pack writes, or members missing from a pack's range
            found = [str(exc)]
        problems += [f"{said}: {line}" for line in found]
    return problems


def _plan_problems(handle: StoreHandle, plan: _Plan, totals: tuple, lengths: dict[int, SpecLengths],
                   starts: list[np.ndarray]) -> list[str]:
    packs, first_pack, last_pack, least, members, unchained, first_member, stored = handle.one(
        _PACKS, plan.id, plan.id) or (0, 0, -1, 1, 0, 0, None, 0)
    epochs = handle.all(_EPOCHS, plan.id)
    drawn = Mixtures(handle).epochs_of(plan.mixture_id)
    if plan.merge_cuts not in _MERGE_CUTS or type(plan.capacity) is not int:
        return [f"its merge_cuts {plan.merge_cuts!r} or capacity {plan.capacity!r} is none a plan has (edited?)"]
    if members != stored:
        return [f"its {packs:,} packs name {members:,} members and {stored:,} are there (edited?)"]
    if (first_pack, last_pack) != (0, packs - 1) or least < 1 or unchained:
        return [f"its {packs:,} packs are not numbered from 0 or do not hold its members end to end (edited?)"]
    counts = [e[2] for e in epochs]
    # Each epoch's packs counted and within the plan's before any is read by what its row says.
    if [e[0] for e in epochs] != list(range(len(drawn))) or any(type(n) is not int or n < 0 for n in counts) \
            or [e[1] for e in epochs] != list(accumulate(counts[:-1], initial=0)) or sum(counts) != packs:
        return [f"its plan_epochs do not divide its {packs:,} packs among the {len(drawn)} epochs of mixture "
                f"'{plan.mixture}' (edited?)"]
    if plan.spec_id not in lengths:
        lengths[plan.spec_id] = rendered_lengths(handle, plan.spec_id, partial=True)
    if plan.merge_cuts != "no" and not starts:
        starts.append(Datasets(handle).row_starts()[1])
    problems, offset = [], first_member or 0
    sums = np.zeros(4, dtype=np.int64)  # packs, entries, tokens, left out
    for (epoch, first, count, entries, tokens, left_out), (start, positions) in zip(epochs, drawn):
        where = f"epoch {epoch}: " if len(drawn) > 1 else ""
        sizes, recorded = (_values(handle, read, "packs", "pack", first, first + count - 1, plan.id)
                           for read in (_PACK_MEMBERS, _PACK_TOKENS))
        held = int(sizes.sum())
        ids = (offset, offset + held - 1)
        entry_joined, placed = (_values(handle, read, "packed_entries", "id", *ids, plan.id)
                                for read in (_MEMBER_ENTRIES, _MEMBER_POSITIONS))
        offset += held
        mixture = StoredMixture(id=plan.mixture_id, name=plan.mixture, start=start, positions=positions)
        entries_drawn = Mixtures(handle).entries_of(mixture)
        found = _epoch_problems(plan, sizes, recorded, entry_joined >> 1, (entry_joined & 1).astype(bool), placed,
                                entries_drawn, lengths[plan.spec_id], starts[0] if starts else None)
        problems += [where + line for line in found]
        if (entries, tokens, left_out) != (held, int(recorded.sum()), positions - held):
            problems.append(f"{where}plan_epochs records {entries:,} entries, {tokens:,} tokens and {left_out:,} left "
                            f"out; its packs hold {held:,} entries and {int(recorded.sum()):,} tokens of "
                            f"{positions:,} positions")
        sums += (count, held, int(recorded.sum()), positions - held)
    if tuple(totals) != (*sums.tolist(), len(drawn)):
        problems.append(f"packing_plans records {totals[0]:,} packs, {totals[1]:,} entries, {totals[2]:,} tokens, "
                        f"{totals[3]:,} left out and {totals[4]} epochs; its epochs add up to {int(sums[0]):,}, "
                        f"{int(sums[1]):,}, {int(sums[2]):,}, {int(sums[3]):,} and {len(drawn)}")
    return problems


def _values(handle: StoreHandle, read: tuple[str, str], table: str, key: str, first: int, last: int, plan_id: int
            ) -> np.ndarray:
    """The values ``read`` of a plan's rows of ``table`` keyed ``first..last``, in key order."""
    found = np.zeros(max(last - first + 1, 0), dtype=np.int64)
    for start, values in key_chunks(handle, table, key, *read, first, last, "plan_id = {mark}", plan_id,
                                    refused=f"its {table} hold a value no pack writes (edited?)",
                                    gaps=f"its {table} {first:,}..{last:,} are not all there (edited?)"):
        found[start - first : start - first + len(values)] = values
    return found


def _epoch_problems(plan: _Plan, sizes: np.ndarray, recorded: np.ndarray, entries: np.ndarray, joined: np.ndarray,
                    positions: np.ndarray, drawn: np.ndarray, lengths: SpecLengths, starts: np.ndarray | None
                    ) -> list[str]:
    """What is wrong with one epoch's packs (``sizes`` members and ``recorded`` tokens each) and
    members (base ``entries``, ``joined`` flags and ``positions``), given the epoch's ``drawn``
    entries by position, the spec's lengths and (merging plans) which entries begin a row."""
    problems: list[str] = []
    pack_starts = np.cumsum(sizes) - sizes

    def said(bad: np.ndarray, what: str) -> None:  # members: how many, and the first one's pack
        if bad.any():
            pack = int(np.searchsorted(pack_starts, np.flatnonzero(bad)[0], side="right")) - 1
            problems.append(f"{int(bad.sum()):,} {what} (the first in pack {pack})")

    at = entries - lengths.first
    known = (at >= 0) & (at < len(lengths.tokens))
    at = np.where(known, at, 0)
    known &= lengths.tokens[at] >= 0  # an entry with no row under the spec reads -1 (partial=True)
    said(~known, f"members have no length under spec '{plan.spec}'")
    said(known & ~lengths.trains[at], f"members do not train under spec '{plan.spec}'")
    inside = positions < len(drawn)
    said(~inside, f"members are past the end of mixture '{plan.mixture}'")
    place = np.where(inside, positions, 0)
    said(inside & (drawn[place] != entries), f"members are not the entry at their position of mixture "
                                             f"'{plan.mixture}'")
    times = np.bincount(place[inside], minlength=len(drawn))
    said(inside & (times[place] > 1), "members are at a position packed more than once")
    drawn_at = drawn.astype(np.int64) - lengths.first
    trains = np.zeros(len(drawn), dtype=bool)
    valid = (drawn_at >= 0) & (drawn_at < len(lengths.tokens))
    trains[valid] = lengths.trains[drawn_at[valid]]
    if missing := int((trains & (times == 0)).sum()):
        problems.append(f"{missing:,} positions whose entries train under spec '{plan.spec}' are in no pack")
    ends = np.zeros(len(entries), dtype=bool)
    ends[np.cumsum(sizes) - 1] = True
    if plan.merge_cuts == "no":
        said(joined, "members are joined to the next in a plan that merges no cuts")
    else:
        assert starts is not None
        after = np.append(entries[1:], -1)  # the next member's entry (none after the last)
        step = np.clip(after - lengths.first, 0, len(starts) - 1)
        said(joined & (ends | (after != entries + 1) | starts[step]),
             "members are joined to what is not the next cut of their conversation in their pack")
    tokens = np.where(known, lengths.tokens[at], 0).astype(np.int64)
    # What each pack trains: every member's tokens; a merged conversation forwards its last cut's
    # (a chain) or, a tree, between that and all its cuts' (branches share their prefix).
    least = np.add.reduceat(np.where(joined, 0, tokens), pack_starts) if len(sizes) else sizes
    most = np.add.reduceat(tokens, pack_starts) if len(sizes) else sizes
    if plan.merge_cuts == "no":
        least = most
    elif plan.merge_cuts == "chains":
        most = least
    unknown = np.add.reduceat(~known, pack_starts) > 0 if len(sizes) else sizes.astype(bool)  # said above
    off = ((recorded < least) | (recorded > most)) & ~unknown
    if off.any():
        k = int(np.flatnonzero(off)[0])
        problems.append(f"{int(off.sum()):,} packs record other token counts than their members make (pack {k}: "
                        f"{int(recorded[k]):,} recorded, {int(least[k]):,}"
                        + (f"..{int(most[k]):,}" if most[k] != least[k] else "") + " by its members)")
    over = np.maximum(recorded, least) > plan.capacity
    if over.any():
        k = int(np.flatnonzero(over)[0])
        problems.append(f"{int(over.sum()):,} packs hold more than the plan's capacity of {plan.capacity:,} tokens "
                        f"(pack {k}: {int(max(recorded[k], least[k])):,})")
    return problems

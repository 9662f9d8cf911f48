"""Which of an epoch's conversations train as one sequence instead of one entry per cut.

v1 expands a conversation of T supervised turns into T cuts, each forwarding the whole history:
O(T^2) tokens. Where each cut's token ids are a prefix of the next cut's, the last cut's ids hold
every cut's context, so the conversation can be forwarded once with every cut's supervised tokens
labelled (a *chain*). Where a template rewrites history (Qwen3 drops past reasoning), cut j shares
only a prefix with cut j-1 and branches off it: the conversation is a *tree* whose branches attend
only to their ancestors (:mod:`.sequences` builds both from the stored tokens).

Nothing is assumed of a template: the check compares the spec's stored token ids, cut after cut.
A row is merged only when every one of its cuts is in the epoch as many times as the others (a
``weight: 2.0`` draws each twice: the row then trains as two merged sequences) and trains;
every other row keeps its cuts as entries, and why is counted per outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import StaleStoreError
from ..render import START

#: Merge modes of ``dataidx pack --merge-cuts``: chains only, or chains and trees.
MODES = ("chains", "trees")
MERGED, TREE = "merged", "tree"
NOT_A_PREFIX, NO_SHARED_PREFIX = "not a prefix", "no shared prefix"
REPEATED, PARTIAL, NOT_TRAINING, TOO_LONG = ("cuts drawn unequally often", "without its siblings",
                                              "a cut does not train", "longer than a pack")
#: Every outcome, merged first: the order info and the report list them in.
OUTCOMES = (MERGED, TREE, NOT_A_PREFIX, NO_SHARED_PREFIX, REPEATED, PARTIAL, NOT_TRAINING, TOO_LONG)
#: Outcomes below this number merged (MERGED, TREE); the others kept their cuts.
_MERGING = 2
#: Tokens compared at a time when finding common prefixes (each costs ~40 bytes of temporaries).
_TOKENS_PER_CHUNK = 1 << 22


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How many rows of an epoch ended one way, their cut entries, and tokens forwarded as cuts and as planned."""

    outcome: str
    rows: int
    entries: int
    cut_tokens: int
    tokens: int


@dataclass(frozen=True, kw_only=True)
class MergedItems:
    """An epoch's items to pack: ``members`` holds positions, item after item (a merged row's cuts
    in order), ``sizes`` each item's member count and ``lengths`` its tokens forwarded."""

    members: np.ndarray
    sizes: np.ndarray
    lengths: np.ndarray
    outcomes: list[Outcome]


@dataclass(frozen=True)
class TokenWords:
    """A spec's stored words and the index of where each base entry's words start (its bit 63, a
    flag, is masked off where read: the mapped index is never copied)."""

    words: np.ndarray
    starts: np.ndarray
    first_entry: int
    mask: int

    def span(self, entry_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = entry_ids - self.first_entry
        begins = (self.starts[at] & START).astype(np.int64)
        return begins, (self.starts[at + 1] & START).astype(np.int64) - begins


def common_prefixes(words: np.ndarray, a: np.ndarray, b: np.ndarray, limits: np.ndarray, mask: int) -> np.ndarray:
    """For each pair ``k``, how many leading words of ``words[a[k]:]`` and ``words[b[k]:]`` have equal
    ids (``& mask``), up to ``limits[k]``: NumPy over a few million words at a time."""
    found = limits.astype(np.int64).copy()
    ends = np.cumsum(limits, dtype=np.int64)
    lo = 0
    while lo < len(limits):
        hi = int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _TOKENS_PER_CHUNK, side="right"))
        hi = max(hi, lo + 1)
        counts = limits[lo:hi].astype(np.int64)
        offsets = np.cumsum(counts) - counts
        steps = np.arange(int(counts.sum()), dtype=np.int64)
        at = np.repeat(a[lo:hi] - offsets, counts)
        at += steps  # each pair's words, one after another
        left = words[at]
        at += np.repeat(b[lo:hi] - a[lo:hi], counts)
        left ^= words[at]
        left &= mask
        hits = np.flatnonzero(left)
        del at, left
        pairs = np.searchsorted(offsets, hits, side="right") - 1
        # Assigned from the last hit back, so each pair keeps its first mismatch.
        found[lo + pairs[::-1]] = (hits - offsets[pairs])[::-1]
        lo = hi
    return found


def merge_epoch(entries: np.ndarray, tokens: np.ndarray, trains: np.ndarray, starts: np.ndarray, first: int,
                words: TokenWords, *, mode: str, capacity: int) -> MergedItems:
    """An epoch's items: positions of ``entries`` (base entry ids) whose entry trains, one item each,
    except rows merged into one chain or tree. ``tokens``, ``trains`` and ``starts`` are indexed
    by ``entry_id - first`` (``starts``: the entry begins its row)."""
    count = len(starts)
    row_first = np.flatnonzero(starts)
    row_size = np.diff(np.append(row_first, count))
    drawn = np.bincount(entries - first, minlength=count)
    multi = row_size > 1
    least, most = np.minimum.reduceat(drawn, row_first), np.maximum.reduceat(drawn, row_first)
    all_train = np.logical_and.reduceat(trains, row_first)
    outcome = np.full(len(row_first), -1, dtype=np.int8)  # -1: not a multi-cut row in this epoch
    seen = multi & (most > 0)
    even = seen & (least == most)  # every cut drawn as often: that many merged copies of the row
    outcome[seen & (least == 0)] = OUTCOMES.index(PARTIAL)
    outcome[seen & (least > 0) & ~even] = OUTCOMES.index(REPEATED)
    outcome[even & ~all_train] = OUTCOMES.index(NOT_TRAINING)
    candidates = np.flatnonzero(even & all_train)
    forwarded = _forwarded(candidates, row_first, row_size, tokens, first, words, mode, outcome)
    outcome[candidates[(outcome[candidates] < _MERGING) & (forwarded > capacity)]] = OUTCOMES.index(TOO_LONG)
    merged = candidates[outcome[candidates] < _MERGING]
    per_copy = np.zeros(len(row_first), dtype=np.int64)  # tokens one merged copy of a row forwards
    per_copy[candidates] = forwarded

    at = entries - first
    in_merged = np.zeros(count, dtype=bool)
    in_merged[_ranges(row_first[merged], row_size[merged])] = True
    singles = np.flatnonzero(trains[at] & ~in_merged[at])
    cuts, copies = row_size[merged], most[merged]
    members = np.concatenate([singles, _copies(at, in_merged, cuts, copies)])
    sizes = np.concatenate([np.ones(len(singles), dtype=np.int64), np.repeat(cuts, copies)])
    lengths = np.concatenate([tokens[at[singles]].astype(np.int64), np.repeat(per_copy[merged], copies)])
    return MergedItems(members=members, sizes=sizes, lengths=lengths,
                       outcomes=_outcomes(outcome, row_first, tokens, trains, drawn, per_copy * most))


def _copies(at: np.ndarray, in_merged: np.ndarray, cuts: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """The positions of merged rows' members, item after item: copy ``i`` of a row is the ``i``-th
    position (in position order) of each of its cuts, in cut order. ``at`` holds each position's
    entry index, ``in_merged`` marks the merged rows' entries (rows in entry order, ``cuts`` and
    ``copies`` per row)."""
    positions = np.flatnonzero(in_merged[at])
    positions = positions[np.argsort(at[positions], kind="stable")]  # by entry, each entry's in position order
    block = cuts.astype(np.int64) * copies
    block_start = np.repeat(np.cumsum(block) - block, block)
    within = np.arange(len(positions), dtype=np.int64) - block_start  # cut * copies + copy
    per_row_copies, per_row_cuts = np.repeat(copies, block), np.repeat(cuts, block)
    found = np.empty_like(positions)
    found[block_start + (within % per_row_copies) * per_row_cuts + within // per_row_copies] = positions
    return found


def _forwarded(candidates: np.ndarray, row_first: np.ndarray, row_size: np.ndarray, tokens: np.ndarray, first: int,
               words: TokenWords, mode: str, outcome: np.ndarray) -> np.ndarray:
    """Tokens each candidate row forwards merged, its outcome set (merged, tree or why not)."""
    if not len(candidates):
        return np.zeros(0, dtype=np.int64)
    sizes = row_size[candidates]
    cuts = _ranges(row_first[candidates], sizes)  # every candidate cut, row after row
    later = np.ones(len(cuts), dtype=bool)
    later[np.cumsum(sizes) - sizes] = False  # a row's first cut has no cut before it
    after = cuts[later]
    begins, counts = words.span(after + first)
    before_begins, before_counts = words.span(after - 1 + first)
    if not (np.array_equal(counts, tokens[after]) and np.array_equal(before_counts, tokens[after - 1])):
        raise StaleStoreError("the stored tokens of a spec do not match its lengths; run dataidx render "
                              "--store-tokens again")
    shared = common_prefixes(words.words, before_begins, begins, np.minimum(before_counts, counts), words.mask)
    extends = shared == before_counts
    # A branch restarts one token early (its first token repeats the last shared one): the token
    # after a branch point is predicted from it, once per branch (see sequences.py).
    own = counts - np.where(extends, shared, shared - 1)
    row_of_pair = np.repeat(np.arange(len(candidates)), sizes - 1)
    forwarded = tokens[cuts[~later]].astype(np.int64) + np.bincount(row_of_pair, weights=own,
                                                                       minlength=len(candidates)).astype(np.int64)
    chains = np.bincount(row_of_pair, weights=~extends, minlength=len(candidates)) == 0
    unshared = np.bincount(row_of_pair, weights=shared == 0, minlength=len(candidates)) > 0
    if mode == "chains":
        outcome[candidates] = np.where(chains, OUTCOMES.index(MERGED), OUTCOMES.index(NOT_A_PREFIX))
    else:
        outcome[candidates] = np.where(chains, OUTCOMES.index(MERGED),
                                       np.where(unshared, OUTCOMES.index(NO_SHARED_PREFIX), OUTCOMES.index(TREE)))
    return forwarded


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``starts[k] .. starts[k] + sizes[k] - 1`` for every ``k``, concatenated."""
    sizes = sizes.astype(np.int64)
    return np.repeat(starts.astype(np.int64) - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))


def _outcomes(outcome: np.ndarray, row_first: np.ndarray, tokens: np.ndarray, trains: np.ndarray, drawn: np.ndarray,
              forwarded: np.ndarray) -> list[Outcome]:
    """Rows, their drawn entries and tokens per outcome, in :data:`OUTCOMES` order (absent ones left out)."""
    found = []
    entry_tokens = np.where(trains, tokens.astype(np.int64) * drawn, 0)  # what the rows' cuts forward unmerged
    row_tokens = np.add.reduceat(entry_tokens, row_first) if len(row_first) else np.zeros(0, dtype=np.int64)
    row_drawn = np.add.reduceat(drawn, row_first) if len(row_first) else np.zeros(0, dtype=np.int64)
    for number, name in enumerate(OUTCOMES):
        rows = outcome == number
        if rows.any():
            as_cuts = int(row_tokens[rows].sum())
            planned = int(forwarded[rows].sum()) if number < _MERGING else as_cuts
            found.append(Outcome(outcome=name, rows=int(rows.sum()), entries=int(row_drawn[rows].sum()),
                                 cut_tokens=as_cuts, tokens=planned))
    return found

"""Chunked, bounded-memory writes give the same store as writing each dataset at once.

The build reads, converts and writes a dataset a chunk at a time, and a mixture is drawn into
compact parts (spans, masks) and written a chunk of positions at a time. None of that may change
a row: tests/chunked_golden.txt holds the tables dataidx 0.2.0 wrote by holding each dataset
whole (same data, configs and seeds: tests/chunked_golden.py), and builds with chunks of 7 rows
must write them as well as builds with the default chunks do; a failure shows the rows that differ.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.index import build, draw, sample_mask

from .chunked_golden import GOLDEN, store_lines, write_data
from .helpers import assert_matches_golden, examples


def test_default_chunks_write_what_whole_datasets_wrote(tmp_path: Path) -> None:
    assert_matches_golden(store_lines(tmp_path), GOLDEN)


def test_tiny_chunks_write_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dataidx.index.datasets.CHUNK_ROWS", 7)
    monkeypatch.setattr("dataidx.index.datasets.CHUNK_BYTES", 1)
    monkeypatch.setattr("dataidx.index.sampling.OFFSETS_PER_CHUNK", 5)
    monkeypatch.setattr("dataidx.store.sqlite.bulk.ROWS_PER_STATEMENT", 3)
    assert_matches_golden(store_lines(tmp_path), GOLDEN)


def _list_draw(n: int, size: int | None, weight: float | None, sampling: str, seed: int) -> tuple[list[int], float]:
    """The draw as dataidx 0.2.0 made it, a Python list of every offset, and the generator's next number."""
    rng = random.Random(seed)

    def one(m: int, k: int) -> list[int]:
        if m == 0:
            return []
        if sampling == "replacement":
            return rng.choices(range(m), k=k)
        repeats, remainder = divmod(k, m)
        return list(range(m)) * repeats + sorted(rng.sample(range(m), remainder))

    chosen = list(range(n))
    if size is not None:
        chosen = [chosen[i] for i in one(len(chosen), size)]
    if weight is not None:
        chosen = [chosen[i] for i in one(len(chosen), int(len(chosen) * weight))]
    return chosen, rng.random()


@given(n=st.integers(0, 400), size=st.one_of(st.none(), st.integers(0, 1200)),
       weight=st.one_of(st.none(), st.floats(0, 3.5)), sampling=st.sampled_from(["exact", "replacement"]),
       seed=st.integers(0, 2**63 - 1))
@settings(max_examples=examples(300))
def test_compact_draws_are_the_list_draws(n: int, size: int | None, weight: float | None, sampling: str,
                                          seed: int) -> None:
    expected, _ = _list_draw(n, size, weight, sampling, seed)
    drawn = draw(n, size, weight, sampling, seed)
    assert drawn.offsets().tolist() == expected
    assert len(drawn) == len(expected)
    assert drawn.counts().tolist() == np.bincount(np.asarray(expected, dtype=np.int64), minlength=n).tolist()


@given(n=st.integers(1, 5000), share=st.floats(0, 1), seed=st.integers(0, 2**32))
@settings(max_examples=examples(200))
def test_sample_mask_takes_the_numbers_random_sample_takes(n: int, share: float, seed: int) -> None:
    """Both branches of CPython's sample (a pool for large k, a set for small k), and the
    generator left in the same state, so the draw after it is the same too."""
    k = int(n * share)
    ours, theirs = random.Random(seed), random.Random(seed)
    mask = sample_mask(n, k, ours)
    assert np.flatnonzero(mask).tolist() == sorted(theirs.sample(range(n), k))
    assert ours.getstate() == theirs.getstate()


@settings(max_examples=examples(60))
@given(ids=st.lists(st.integers(1, 30), max_size=120), cuts=st.lists(st.integers(1, 40), max_size=8))
def test_positions_chunked_anywhere_store_the_same_rows(ids: list[int], cuts: list[int]) -> None:
    """Stretches of consecutive ids are found across chunk boundaries: any chunking, same rows."""
    import tempfile

    from sqlalchemy import text

    from dataidx.store.mixtures.positions import PositionWriter
    from dataidx.store.sqlite.files import create_store

    # Long stretches so runs appear: every id i expands to i*3, i*3+1, i*3+2.
    expanded = np.asarray([3 * i + j for i in ids for j in range(3)], dtype=np.int64)
    bounds = sorted({min(c, len(expanded)) for c in cuts} | {0, len(expanded)})
    stored = []
    for pieces in ([expanded], [expanded[a:b] for a, b in zip(bounds, bounds[1:])]):
        engine = create_store(Path(tempfile.mkdtemp()) / "s.db")
        with engine.begin() as connection:
            positions = PositionWriter(connection, 7, 100, min_run=4)
            for piece in pieces:
                positions.add_ids(piece)
            positions.close()
            stored.append((
                connection.execute(text("SELECT * FROM mixture_runs ORDER BY id")).all(),
                connection.execute(text("SELECT * FROM mixture_entries ORDER BY id")).all(),
            ))
        engine.dispose()
    assert stored[0] == stored[1]
    runs, entries = stored[0]
    assert sum(run.length for run in runs) + len(entries) == len(expanded)


def test_a_chunk_that_fails_to_write_fails_the_build_and_leaves_no_store(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks are written on a writer thread; a failure there, even of the last chunk of the last
    dataset, must stop the build, not commit a dataset whose entries were never written."""
    from dataidx.errors import StoreError
    from dataidx.store.base.arrays import insert_base_entries

    config, _ = write_data(tmp_path)

    def failing(connection, dataset_id, *args):  # the real insert's signature
        if dataset_id == 5:  # the last dataset, one chunk
            raise StoreError("disk full (injected)")
        return insert_base_entries(connection, dataset_id, *args)

    monkeypatch.setattr("dataidx.store.base.arrays.insert_base_entries", failing)
    with pytest.raises(StoreError, match="disk full"):
        build(config, tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix in (".db", ".tmp") or ".tmp" in p.name] == []


@settings(max_examples=examples(60))
@given(sizes=st.lists(st.one_of(st.integers(1, 300), st.integers(2**16 - 2, 2**16 + 1)), max_size=12),
       tokens=st.data(), chunk=st.integers(1, 4), first=st.integers(1, 2**40), first_pack=st.integers(0, 100))
def test_packs_chunked_anywhere_store_their_members_counts_and_tokens(sizes: list[int], tokens: st.DataObject,
                                                                      chunk: int, first: int, first_pack: int) -> None:
    """Chunks whose packs fit 16 bits travel as one short integer each, the others with their
    first member summed by SQLite: any mix of the two, the rows the plan holds."""
    import tempfile
    from unittest import mock

    from sqlalchemy import text

    from dataidx.store.plans.bulk import insert_packs
    from dataidx.store.sqlite.files import create_store

    count = st.one_of(st.integers(1, 2**16 - 1), st.integers(2**16 - 2, 2**16), st.integers(1, 2**31 - 1))
    counts = tokens.draw(st.lists(count, min_size=len(sizes), max_size=len(sizes)))
    engine = create_store(Path(tempfile.mkdtemp()) / "s.db")
    with mock.patch("dataidx.store.plans.bulk.PLAN_ROWS_PER_STATEMENT", chunk), engine.begin() as connection:
        insert_packs(connection, 7, first_member=first, sizes=np.asarray(sizes, dtype=np.int64),
                     tokens=np.asarray(counts, dtype=np.int32), first_pack=first_pack)
        stored = connection.execute(text("SELECT plan_id, pack, first_member, members, tokens FROM packs "
                                         "ORDER BY pack")).all()
    engine.dispose()
    starts = np.cumsum([0, *sizes])[:-1].tolist()
    assert [tuple(row) for row in stored] == [(7, first_pack + i, first + starts[i], sizes[i], counts[i])
                                              for i in range(len(sizes))]


@settings(max_examples=examples(40))
@given(members=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**32 - 1), st.booleans()), max_size=12),
       chunk=st.integers(1, 4), before=st.integers(0, 2**40), merged=st.booleans())
def test_members_chunked_anywhere_are_numbered_after_the_last(members: list[tuple[int, int, bool]], chunk: int,
                                                                before: int, merged: bool) -> None:
    import tempfile
    from unittest import mock

    from sqlalchemy import text

    from dataidx.store.plans.bulk import insert_pack_members
    from dataidx.store.sqlite.files import create_store

    engine = create_store(Path(tempfile.mkdtemp()) / "s.db")
    with mock.patch("dataidx.store.plans.bulk.PLAN_ROWS_PER_STATEMENT", chunk), engine.begin() as connection:
        if before:  # another plan's last member
            connection.execute(text("INSERT INTO packed_entries (id, plan_id, position, entry_id) "
                                    "VALUES (:id, 1, 0, 1)"), {"id": before})
        packed = np.asarray([position << 32 | entry for position, entry, _ in members], dtype=np.int64)
        joined = np.asarray([join for *_, join in members], dtype=bool) if merged else None
        insert_pack_members(connection, 2, before + 1, packed, joined)
        stored = connection.execute(text("SELECT id, plan_id, position, entry_id, joined FROM packed_entries "
                                         "WHERE plan_id = 2 ORDER BY id")).all()
    engine.dispose()
    assert [tuple(row) for row in stored] == [(before + 1 + i, 2, position, entry, int(merged and join))
                                              for i, (position, entry, join) in enumerate(members)]


def test_members_numbered_other_than_asked_are_refused(tmp_path: Path) -> None:
    from sqlalchemy import text

    from dataidx.errors import StoreError
    from dataidx.store.plans.bulk import insert_pack_members
    from dataidx.store.sqlite.files import create_store

    engine = create_store(tmp_path / "s.db")
    with engine.begin() as connection, pytest.raises(StoreError, match=r"numbered up to 3, not 4 \.\. 5"):
        connection.execute(text("INSERT INTO packed_entries (id, plan_id, position, entry_id) VALUES (1, 1, 0, 1)"))
        insert_pack_members(connection, 2, 4, np.asarray([1 << 32 | 5, 2 << 32 | 6], dtype=np.int64))
    engine.dispose()

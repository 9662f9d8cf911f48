"""Chunked, bounded-memory writes give the same store as writing each dataset at once.

The build reads, converts and writes a dataset a chunk at a time, and a mixture is drawn into
compact parts (spans, masks) and written a chunk of positions at a time. None of that may change
a row: the pinned table hashes below were taken from stores that dataidx 0.2.0 wrote by holding
each dataset whole (same data, configs and seeds), and builds with chunks of 7 rows must match
them as well as builds with the default chunks do.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.index import add_mixture, build, draw, sample_mask

from .helpers import write_jsonl, write_yaml

#: Tables a build or a mix writes, compared without their timestamps.
TABLES = ("datasets", "base_entries", "rejected_rows", "mixtures", "mixture_datasets", "mixture_runs",
          "mixture_entries")
UNSTAMPED = ("created_at", "seconds", "files", "arrow_files", "path", "info", "config_text", "config_sha256", "dataidx_version",
             # added by revision 0007, after the hashes were taken; test_mixtures checks their values
             "epochs", "spec", "spec_fingerprint", "token_budget", "supervised_token_budget",
             # added by revision 0008; tests/test_day_one.py checks its counts
             "empty_rows")


def _data(folder: Path) -> tuple[Path, Path]:
    """Five datasets that take every write path: vectorised and row by row, rejects, a
    ``columns`` rename, one entry per row and many; a build config and a mix config."""
    rng = random.Random(0)
    words = "alpha beta gamma delta epsilon zeta eta theta".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    write_jsonl(folder / "alpaca.jsonl", [{"instruction": text(3), "input": text(rng.randint(0, 2)), "output": text(4)}
                                          for _ in range(3000)])
    chats = []
    for _ in range(900):
        turns = []
        for _ in range(rng.randint(1, 4)):
            turns += [{"from": "human", "value": text(2)}, {"from": rng.choice(["gpt", "gpt", "weird"]), "value": text(3)}]
        chats.append({"conversations": turns})
    write_jsonl(folder / "sharegpt.jsonl", chats)
    # Row path: a null value fails the converter, rejected under on_error: skip.
    write_jsonl(folder / "mixed.jsonl", [
        {"conversations": [{"from": "human", "value": None if i % 37 == 5 else f"q{i}"},
                           {"from": "gpt", "value": f"a{i}"}, {"from": "human", "value": "more"},
                           {"from": "gpt", "value": "yes"}]}
        for i in range(700)
    ])
    write_jsonl(folder / "messages.jsonl", [
        {"messages": [{"role": "user", "content": [{"type": "text", "value": f"u{i}"}], "loss_weight": 0.0},
                      {"role": "assistant", "content": [{"type": "text", "value": f"a{i}"}],
                       "loss_weight": float(i % 3 != 0)},
                      {"role": "user", "content": [{"type": "text", "value": "again"}], "loss_weight": 0.0},
                      {"role": "assistant", "content": [{"type": "text", "value": "ok"}], "loss_weight": 1.0}]}
        for i in range(400)
    ])
    write_jsonl(folder / "renamed.jsonl", [{"q": text(2), "a": text(2)} for _ in range(250)])
    datasets = f"""
alpaca:
  path: {folder}/alpaca.jsonl
  source: local
  converter: alpaca
  size: 2000
  weight: 1.7
sharegpt:
  path: {folder}/sharegpt.jsonl
  source: local
  converter: sharegpt
  weight: 0.37
mixed:
  path: {folder}/mixed.jsonl
  source: local
  converter: sharegpt
  on_error: skip
  size: 2500
messages:
  path: {folder}/messages.jsonl
  source: local
  weight: 2.5
renamed:
  path: {folder}/renamed.jsonl
  source: local
  converter: alpaca
  columns:
    instruction: q
    output: a
"""
    config = write_yaml(folder / "build.yaml", datasets)
    mix = write_yaml(folder / "mix.yaml", datasets.replace("size: 2000", "size: 9000").replace("weight: 0.37",
                                                                                            "weight: 2.5"))
    return config, mix


def _table_hashes(store: Path) -> dict[str, str]:
    connection = sqlite3.connect(store)
    found = {}
    for table in TABLES:
        columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")') if row[1] not in UNSTAMPED]
        digest = hashlib.sha256()
        order = ", ".join(str(i + 1) for i in range(len(columns)))
        for row in connection.execute(f'SELECT {", ".join(columns)} FROM "{table}" ORDER BY {order}'):
            digest.update(json.dumps(row).encode())
        found[table] = digest.hexdigest()[:16]
    connection.close()
    return found


def _stores(folder: Path) -> dict[str, dict[str, str]]:
    config, mix = _data(folder)
    found = {}
    for sampling in ("exact", "replacement"):
        store = folder / f"{sampling}.db"
        build(config, store, seed=11, sampling=sampling)
        add_mixture(store, mix, "grown", seed=5, sampling=sampling)
        found[sampling] = _table_hashes(store)
    return found


#: Taken from stores written by dataidx 0.2.0 (commit 8cbd670), which held each dataset whole.
WRITTEN_WHOLE = {
    "exact": {
        "datasets": "4d5ddf2dde8fcb86",
        "base_entries": "ed61ad082b639ac3",
        "rejected_rows": "3058d9186cdff0f8",
        "mixtures": "f8d0f4761a5cdfdf",
        "mixture_datasets": "71868b3d1cbe7668",
        "mixture_runs": "6831209f49807598",
        "mixture_entries": "58bd1614f3a61aed",
    },
    "replacement": {
        "datasets": "4d5ddf2dde8fcb86",
        "base_entries": "ed61ad082b639ac3",
        "rejected_rows": "3058d9186cdff0f8",
        "mixtures": "67a641afc744bf71",
        "mixture_datasets": "d8581a3a6661ca2d",
        "mixture_runs": "cc15ffa283371afd",
        "mixture_entries": "550b2a67eeb19d2d",
    },
}


def test_default_chunks_write_what_whole_datasets_wrote(tmp_path: Path) -> None:
    assert _stores(tmp_path) == WRITTEN_WHOLE


def test_tiny_chunks_write_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dataidx.index.datasets.CHUNK_ROWS", 7)
    monkeypatch.setattr("dataidx.index.datasets.CHUNK_BYTES", 1)
    monkeypatch.setattr("dataidx.index.sampling.CHUNK", 5)
    monkeypatch.setattr("dataidx.store.sqlite.bulk.CHUNK", 3)
    assert _stores(tmp_path) == WRITTEN_WHOLE


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
@settings(max_examples=300, deadline=None)
def test_compact_draws_are_the_list_draws(n: int, size: int | None, weight: float | None, sampling: str,
                                          seed: int) -> None:
    expected, _ = _list_draw(n, size, weight, sampling, seed)
    drawn = draw(n, size, weight, sampling, seed)
    assert drawn.offsets().tolist() == expected
    assert len(drawn) == len(expected)
    assert drawn.counts().tolist() == np.bincount(np.asarray(expected, dtype=np.int64), minlength=n).tolist()


@given(n=st.integers(1, 5000), share=st.floats(0, 1), seed=st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_sample_mask_takes_the_numbers_random_sample_takes(n: int, share: float, seed: int) -> None:
    """Both branches of CPython's sample (a pool for large k, a set for small k), and the
    generator left in the same state, so the draw after it is the same too."""
    k = int(n * share)
    ours, theirs = random.Random(seed), random.Random(seed)
    mask = sample_mask(n, k, ours)
    assert np.flatnonzero(mask).tolist() == sorted(theirs.sample(range(n), k))
    assert ours.getstate() == theirs.getstate()


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(1, 30), max_size=120), cuts=st.lists(st.integers(1, 40), max_size=8))
def test_positions_chunked_anywhere_store_the_same_rows(ids: list[int], cuts: list[int]) -> None:
    """Stretches of consecutive ids are found across chunk boundaries: any chunking, same rows."""
    import tempfile

    from sqlalchemy import text

    from dataidx.store import PositionWriter
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
    from dataidx.store import insert_base_entries

    config, _ = _data(tmp_path)

    def failing(connection, dataset_id, *args):  # the real insert's signature
        if dataset_id == 5:  # the last dataset, one chunk
            raise StoreError("disk full (injected)")
        return insert_base_entries(connection, dataset_id, *args)

    monkeypatch.setattr("dataidx.index.datasets.insert_base_entries", failing)
    with pytest.raises(StoreError, match="disk full"):
        build(config, tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix in (".db", ".tmp") or ".tmp" in p.name] == []

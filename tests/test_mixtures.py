"""Named mixtures: added from the stored index alone, reproducible, removable, explained in SQL."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx import DataEngine, __version__
from dataidx.cli import cli
from dataidx.errors import DataidxError, StoreError
from dataidx.index import add_mixture, derive_seed
from dataidx.read import verify_store
from dataidx.store import SCHEMA_REVISION, composition, migrate_store, remove_mixture, run_query, store_info
from dataidx.store.connect import store_revision

from .helpers import (
    alpaca_rows,
    chat_rows,
    downgrade_store,
    engine_length,
    examples,
    insert_mixture_entries,
    write_jsonl,
    write_yaml,
)

ENTRIES = "SELECT position, dataset, row, cut FROM entries WHERE mixture = :m ORDER BY position"


def entries(store: Path, mixture: str = "default") -> list[tuple]:
    return run_query(store, ENTRIES, {"m": mixture})[1]


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "sources"
    return {
        "chat": write_jsonl(folder / "chat.jsonl", chat_rows([1, 2, 3, 1, 2, 4, 1, 1])),
        "alpaca": write_jsonl(folder / "alpaca.jsonl", alpaca_rows(30)),
    }


def yaml_for(sources: dict[str, Path], *, chat: str = "", alpaca: str = "", order=("chat", "alpaca")) -> str:
    blocks = {
        "chat": f"chat:\n  path: {sources['chat']}\n  source: local\n  converter: sharegpt\n{chat}",
        "alpaca": f"alpaca:\n  path: {sources['alpaca']}\n  source: local\n  converter: alpaca\n{alpaca}",
    }
    return "".join(blocks[name] for name in order)


def test_mix_works_with_the_sources_moved_away_and_leaves_other_mixtures(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources))
    default_before = entries(store)
    shutil.move(tmp_path / "sources", tmp_path / "elsewhere")
    config = write_yaml(tmp_path / "mix.yaml", yaml_for(sources, chat="  size: 5\n", alpaca="  weight: 2.5\n"))
    summary = add_mixture(store, config, "small", seed=3)
    assert summary.datasets == {"chat": 5, "alpaca": 75}
    assert entries(store) == default_before
    small = entries(store, "small")
    assert [p for p, *_ in small] == list(range(80))
    assert len({(r, c) for _, d, r, c in small if d == "chat"}) == 5
    shutil.move(tmp_path / "elsewhere", tmp_path / "sources")
    with DataEngine(store, mixture="small") as engine:
        assert len(engine) == 80
        assert engine[0]["_dataset_name"] == "chat" and engine[-1]["_dataset_name"] == "alpaca"
        result = CliRunner().invoke(cli, ["show", str(store), "-1", "--mixture", "small"])
        assert json.loads(result.output) == engine[-1]


def test_mix_config_errors_name_the_problem(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources))
    other = write_yaml(tmp_path / "other.yaml", f"ghost:\n  path: {sources['chat']}\n  source: local\n")
    with pytest.raises(DataidxError,
                       match=r"mixture 'm': datasets not in the store: ghost \(the store has: chat, alpaca\)"):
        add_mixture(store, other, "m")
    config = write_yaml(tmp_path / "c.yaml", yaml_for(sources))
    with pytest.raises(DataidxError, match="mixture 'default' already exists"):
        add_mixture(store, config, "default")
    with pytest.raises(DataidxError, match="unknown sampling 'bogus'"):
        add_mixture(store, config, "x", sampling="bogus")
    assert [m["name"] for m in store_info(store)["mixtures"]] == ["default"]


def test_remove_mixture_and_add_again(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources))
    config = write_yaml(tmp_path / "c.yaml", yaml_for(sources, alpaca="  size: 4\n"))
    add_mixture(store, config, "a", seed=1)
    add_mixture(store, config, "b", seed=2)
    b_before = entries(store, "b")
    assert remove_mixture(store, "a") == 15 + 4
    assert entries(store, "a") == []
    assert entries(store, "b") == b_before
    with pytest.raises(DataidxError, match=r"no mixture 'a' \(mixtures: default, b\)"):
        remove_mixture(store, "a")
    add_mixture(store, config, "a", seed=1)
    with pytest.raises(StoreError, match="no mixture 'gone'"):
        DataEngine(store, mixture="gone")
    _, counts = run_query(store, "SELECT mixture, count(*) FROM entries GROUP BY mixture ORDER BY mixture")
    assert counts == [("a", 19), ("b", 19), ("default", 45)]


@pytest.mark.slow
def test_same_inputs_and_seed_give_the_same_mixture_in_another_process(tmp_path, sources) -> None:
    config = write_yaml(tmp_path / "c.yaml", yaml_for(sources, chat="  size: 9\n", alpaca="  weight: 0.7\n"))
    stores = []
    for number in range(2):
        store = tmp_path / f"p{number}.db"
        subprocess.run([sys.executable, "-m", "dataidx", "build", str(config), "-o", str(store), "--seed", "11",
                        "--sampling", "replacement", "-q"], check=True, env=os.environ.copy())
        stores.append(store)
    assert entries(stores[0]) == entries(stores[1])
    assert len(entries(stores[0])) == 9 + 21


@pytest.mark.parametrize("sampling", ["exact", "replacement"])
def test_adding_removing_or_reordering_datasets_keeps_each_draw(tmp_path, sources, make_store, sampling) -> None:
    store = make_store(yaml_for(sources))
    draws = {
        "both": yaml_for(sources, chat="  size: 6\n", alpaca="  size: 12\n"),
        "reordered": yaml_for(sources, chat="  size: 6\n", alpaca="  size: 12\n", order=("alpaca", "chat")),
        "alone": yaml_for(sources, alpaca="  size: 12\n", order=("alpaca",)),
    }
    for name, text in draws.items():
        add_mixture(store, write_yaml(tmp_path / f"{name}.yaml", text), name, seed=5, sampling=sampling)
    built = {name: make_store(draws[name], seed=5, sampling=sampling) for name in ("both", "alone")}  # at build

    def alpaca_draw(mixture: str, store: Path = store) -> list:
        return [(r, c) for _, d, r, c in entries(store, mixture) if d == "alpaca"]

    assert alpaca_draw("both") == alpaca_draw("reordered") == alpaca_draw("alone")
    assert alpaca_draw("default", built["both"]) == alpaca_draw("default", built["alone"]) == alpaca_draw("alone")
    assert len(alpaca_draw("both")) == 12


def test_provenance_is_recorded(tmp_path, sources, make_store) -> None:
    text = yaml_for(sources, chat="  size: 20\n", alpaca="  size: 10\n  weight: 1.5\n")
    store = make_store(text, seed=8, sampling="replacement")
    (mixture,) = store_info(store)["mixtures"]
    assert (mixture["seed"], mixture["sampling"], mixture["config_text"]) == (8, "replacement", text)
    assert mixture["dataidx_version"] == __version__
    assert mixture["datasets"]["chat"] == {"seed": derive_seed(8, "chat"), "size": 20, "weight": None,
                                           "base_entries": 15, "requested": 20, "entries": 20,
                                           "token_budget": None, "supervised_token_budget": None}
    assert mixture["datasets"]["alpaca"]["requested"] == 15


def test_composition_counts_shares_and_repeats(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources, chat="  weight: 2\n", alpaca="  size: 5\n"))
    assert composition(store) == [
        {"dataset": "chat", "entries": 30, "share": round(30 / 35, 6), "base_entries": 15, "distinct_entries": 15,
         "distinct_rows": 8, "max_repeats": 2, "coverage": 1.0},
        {"dataset": "alpaca", "entries": 5, "share": round(5 / 35, 6), "base_entries": 30, "distinct_entries": 5,
         "distinct_rows": 5, "max_repeats": 1, "coverage": round(5 / 30, 6)},
    ]
    result = CliRunner().invoke(cli, ["compose", str(store), "--json"])
    assert json.loads(result.output) == composition(store)
    _, turns = run_query(store, "SELECT row, entries, last_cut FROM turns WHERE dataset = 'chat' ORDER BY row")
    assert turns == [(0, 1, 2), (1, 2, 4), (2, 3, 6), (3, 1, 2), (4, 2, 4), (5, 4, 8), (6, 1, 2), (7, 1, 2)]
    _, repeats = run_query(store, "SELECT max(repeats), min(repeats) FROM repeats WHERE dataset = 'chat'")
    assert repeats == [(2, 2)]


def test_query_csv(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources))
    result = CliRunner().invoke(cli, ["query", str(store), "SELECT dataset, entries FROM composition", "--csv"])
    assert result.output == "dataset,entries\nchat,15\nalpaca,30\n"
    both = CliRunner().invoke(cli, ["query", str(store), "SELECT 1", "--csv", "--json"])
    assert both.exit_code == 2


def test_cli_mix_and_remove(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources))
    config = write_yaml(tmp_path / "c.yaml", yaml_for(sources, chat="  size: 3\n"))
    runner = CliRunner()
    added = runner.invoke(cli, ["mix", str(store), str(config), "--name", "tiny", "--seed", "4"])
    assert added.exit_code == 0, added.output
    assert "added mixture 'tiny' of 33 entries (seed 4, exact)" in added.stderr
    again = runner.invoke(cli, ["mix", str(store), str(config), "--name", "tiny"])
    assert again.exit_code == 1 and "already exists" in again.stderr
    removed = runner.invoke(cli, ["remove-mixture", str(store), "tiny"])
    assert removed.exit_code == 0 and "removed mixture 'tiny' (33 entries)" in removed.stderr


def test_a_store_of_the_first_schema_revision_migrates(tmp_path, sources, make_store) -> None:
    store = make_store(yaml_for(sources, alpaca="  size: 7\n"))
    before = entries(store)
    counted = composition(store)
    downgrade_store(store, "0001")
    assert store_revision(store) == "0001"
    with pytest.raises(StoreError, match=f"older than '{SCHEMA_REVISION}'; upgrade it with: dataidx migrate {store}"):
        DataEngine(store)
    result = CliRunner().invoke(cli, ["migrate", str(store)])
    assert result.exit_code == 0 and f"from schema revision 0001 to {SCHEMA_REVISION}" in result.stderr
    assert store_revision(store) == SCHEMA_REVISION
    assert entries(store) == before
    assert composition(store) == counted  # counted again from the positions by revision 0006
    assert engine_length(store) == len(before)
    assert migrate_store(store) == (SCHEMA_REVISION, SCHEMA_REVISION)
    assert sorted(p.name for p in store.parent.iterdir() if p.name.endswith(".tmp")) == []
    assert CliRunner().invoke(cli, ["verify", str(store)]).exit_code == 0  # its views are the schema's


@pytest.mark.parametrize("sampling", ["exact", "replacement"])
def test_composition_counts_stored_at_write_time_equal_the_positions(sources, make_store, sampling: str) -> None:
    store = make_store(yaml_for(sources, chat="  weight: 2.5\n", alpaca="  size: 7\n"), sampling=sampling)
    add_mixture(store, write_yaml(sources["chat"].parent / "m.yaml", yaml_for(sources, alpaca="  weight: 3\n")), "m",
                seed=5, sampling=sampling)
    for mixture in ("default", "m"):
        _, recount = run_query(store, "SELECT dataset, sum(repeats), count(*), count(DISTINCT row), max(repeats) "
                                      f"FROM repeats WHERE mixture = '{mixture}' GROUP BY dataset ORDER BY dataset")
        stored = sorted((r["dataset"], r["entries"], r["distinct_entries"], r["distinct_rows"], r["max_repeats"])
                        for r in composition(store, mixture))
        assert stored == [tuple(row) for row in recount]
    assert verify_store(store)["ok"]
    with sqlite3.connect(store) as connection:  # a count that no longer matches its positions
        connection.execute("UPDATE mixture_datasets SET max_repeats = max_repeats + 1 WHERE mixture_id = 1")
    connection.close()
    report = verify_store(store)
    assert not report["ok"] and any("mixture 'default', dataset 'chat'" in line for line in report["integrity"])


@settings(max_examples=examples(40))
@given(pieces=st.lists(st.one_of(st.tuples(st.just("run"), st.integers(1, 30), st.integers(0, 12)),
                                 st.tuples(st.just("ids"), st.lists(st.integers(1, 40), max_size=8))), max_size=6))
def test_runs_and_explicit_positions_store_exactly_the_ids(pieces: list) -> None:
    """Long runs become mixture_runs rows, the rest mixture_entries rows; mixture_positions must
    give back exactly the positions asked for, in a store made by the migrations."""
    import tempfile

    from sqlalchemy import text

    from dataidx.store.sqlite.files import create_store

    ids: list[int] = []
    for kind, *value in pieces:
        if kind == "run":
            start, length = value
            ids += list(range(start, start + length))
        else:
            ids += value[0]
    engine = create_store(Path(tempfile.mkdtemp()) / "s.db")
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO base_entries (id, dataset_id, row) "
                                "SELECT value, 1, value FROM json_each(:ids)"),
                           {"ids": json.dumps(list(range(1, 60)))})
        insert_mixture_entries(connection, 7, 100, ids, min_run=4)
        stored = connection.execute(text("SELECT id, mixture_id, entry_id FROM mixture_positions ORDER BY id")).all()
        runs = connection.execute(text("SELECT count(*) FROM mixture_runs")).scalar()
    engine.dispose()
    assert stored == [(100 + i, 7, entry) for i, entry in enumerate(ids)]
    stretches, length = [], 0
    for i, entry in enumerate(ids):
        length = length + 1 if i and entry == ids[i - 1] + 1 else 1
        if i + 1 == len(ids) or ids[i + 1] != entry + 1:
            stretches.append(length)
    assert runs == sum(1 for n in stretches if n >= 4)


def test_mix_reads_names_sizes_weights_only_and_checks_the_seed(tmp_path: Path, alpaca3k_store: Path) -> None:
    custom = write_yaml(tmp_path / "m.yaml", "alp:\n  path: moved\n  converter: someone_elses_plugin\n  size: 7\n")
    assert add_mixture(alpaca3k_store, custom, "small").entries == 7
    with pytest.raises(DataidxError, match="does not fit in 64 bits"):
        add_mixture(alpaca3k_store, custom, "huge", seed=2**64)

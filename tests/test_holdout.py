"""Evaluation rows in the same store: ``dataidx build --val-size`` (LLaMA-Factory's ``val_size``)
holds out whole rows as mixture ``eval``, which no training mixture draws, checked in SQL."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import add_mixture
from dataidx.store import run_query, store_info

from .helpers import alpaca_rows, chat_rows, engine_length, one_line_error, write_jsonl, write_yaml

TURNS = [1, 2, 3, 1, 2, 4, 1, 1]
ROWS = len(TURNS) + 30

#: Over the documented views alone: entries of a training mixture whose row the eval mixture holds.
OVERLAP = """
SELECT count(*) FROM entries AS t
JOIN (SELECT DISTINCT dataset, "row" FROM entries WHERE mixture = 'eval') AS e
  ON e.dataset = t.dataset AND e."row" = t."row"
WHERE t.mixture <> 'eval'
"""
HELD_ROWS = "SELECT DISTINCT dataset, \"row\" FROM entries WHERE mixture = 'eval' ORDER BY 1, 2"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    folder = tmp_path / "sources"
    chat = write_jsonl(folder / "chat.jsonl", chat_rows(TURNS))
    alpaca = write_jsonl(folder / "alpaca.jsonl", alpaca_rows(30))
    return write_yaml(tmp_path / "train.yaml",
                      f"chat:\n  path: {chat}\n  source: local\n  converter: sharegpt\n"
                      f"alpaca:\n  path: {alpaca}\n  source: local\n  converter: alpaca\n  weight: 2\n")


def build(config: Path, store: Path, *options: str):
    return CliRunner().invoke(cli, ["build", str(config), "-o", str(store), "-q", *options])


def test_val_size_holds_out_whole_rows_that_no_training_mixture_draws(tmp_path, config) -> None:
    store = tmp_path / "s.db"
    assert build(config, store, "--val-size", "0.25").exit_code == 0
    held = run_query(store, HELD_ROWS)[1]
    assert len(held) == math.ceil(0.25 * ROWS)  # as LLaMA-Factory's train_test_split counts a fraction
    # Every cut of a held-out row is in eval, once: a chat row of k turns is k entries.
    cuts = sum(TURNS[row] if dataset == "chat" else 1 for dataset, row in held)
    assert engine_length(store, mixture="eval") == cuts
    assert run_query(store, OVERLAP)[1] == [(0,)]
    trained = {tuple(row) for row in run_query(store, "SELECT DISTINCT dataset, \"row\" FROM entries "
                                                      "WHERE mixture = 'default'")[1]}
    assert len(trained) == ROWS - len(held)  # the rest all train
    add_mixture(store, config, "again", seed=5)  # re-mixing keeps them out too
    assert run_query(store, OVERLAP)[1] == [(0,)]
    info = {mixture["name"]: mixture for mixture in store_info(store)["mixtures"]}
    assert info["eval"]["held_out_rows"] == len(held) and info["default"]["held_out_rows"] is None
    shown = CliRunner().invoke(cli, ["info", str(store)]).output
    assert f"held out for evaluation: {len(held)} rows" in shown
    composed = CliRunner().invoke(cli, ["compose", str(store), "--mixture", "eval"])
    assert composed.exit_code == 0 and "held out for evaluation" in composed.output + composed.stderr
    assert CliRunner().invoke(cli, ["verify", str(store)]).exit_code == 0  # the draw summaries add up


def test_val_size_count_is_rows_and_the_seed_decides_which(tmp_path, config) -> None:
    stores = [tmp_path / f"{name}.db" for name in ("a", "b", "c")]
    for store, seed in zip(stores, ("1", "1", "2")):
        assert build(config, store, "--val-size", "5", "--seed", seed).exit_code == 0
    held = [run_query(store, HELD_ROWS)[1] for store in stores]
    assert len(held[0]) == 5 and held[0] == held[1] and held[0] != held[2]


@pytest.mark.parametrize("value, said", [
    ("0", "give a fraction of the rows in (0, 1)"),
    ("-0.5", "give a fraction of the rows in (0, 1)"),
    ("1.5", "give a fraction of the rows in (0, 1)"),
    ("1.0", "give a fraction of the rows in (0, 1), or a whole number of rows (1.0 is every row; 1 holds out one)"),
    ("ten", "give a fraction of the rows in (0, 1)"),
    (str(ROWS), f"holds out {ROWS} of the {ROWS} rows"),
    ("0.999", f"holds out {ROWS} of the {ROWS} rows"),
])
def test_bad_val_size_is_one_line_and_writes_nothing(tmp_path, config, value, said) -> None:
    store = tmp_path / "s.db"
    one_line_error(build(config, store, "--val-size", value), said)
    assert not store.exists()


def test_a_mixture_cannot_take_the_eval_name(tmp_path, config) -> None:
    store = tmp_path / "s.db"
    assert build(config, store, "--val-size", "3").exit_code == 0
    before = run_query(store, "SELECT mixture, count(*) FROM entries GROUP BY mixture ORDER BY 1")[1]
    result = CliRunner().invoke(cli, ["mix", str(store), str(config), "--name", "eval"])
    one_line_error(result, "mixture 'eval' is the held-out evaluation set")
    assert run_query(store, "SELECT mixture, count(*) FROM entries GROUP BY mixture ORDER BY 1")[1] == before


@pytest.fixture
def eval_config(tmp_path: Path) -> Path:
    rows = write_jsonl(tmp_path / "sources" / "eval.jsonl", chat_rows([2, 1, 1]))
    return write_yaml(tmp_path / "eval.yaml", f"held:\n  path: {rows}\n  source: local\n  converter: sharegpt\n")


def test_eval_yaml_is_mixture_eval_and_never_trained_on(tmp_path, config, eval_config) -> None:
    store = tmp_path / "s.db"
    assert build(config, store, "--eval", str(eval_config)).exit_code == 0
    by_mixture = "SELECT mixture, dataset, count(*) FROM entries GROUP BY 1, 2 ORDER BY 1, 2"
    assert run_query(store, by_mixture)[1] == [("default", "alpaca", 60), ("default", "chat", sum(TURNS)),
                                               ("eval", "held", 4)]
    assert run_query(store, OVERLAP)[1] == [(0,)]
    assert engine_length(store, mixture="eval") == 4
    info = {mixture["name"]: mixture for mixture in store_info(store)["mixtures"]}
    assert info["eval"]["held_out_rows"] == 3
    refused = CliRunner().invoke(cli, ["mix", str(store), str(eval_config), "--name", "m"])
    one_line_error(refused, "dataset 'held' is held out whole for evaluation")


def test_eval_yaml_reading_a_train_file_is_refused(tmp_path, config) -> None:
    chat = tmp_path / "sources" / "chat.jsonl"
    overlapping = write_yaml(tmp_path / "bad.yaml", f"again:\n  path: {tmp_path}/sources/../sources/chat.jsonl\n"
                                                    "  source: local\n  converter: sharegpt\n")
    store = tmp_path / "s.db"
    one_line_error(build(config, store, "--eval", str(overlapping)), f"reads {chat} (split 'train') as train dataset")
    clash = write_yaml(tmp_path / "clash.yaml", f"chat:\n  path: {tmp_path}/other.jsonl\n  source: local\n")
    one_line_error(build(config, store, "--eval", str(clash)), "dataset 'chat' is also a dataset of")
    assert not store.exists()


def test_eval_and_val_size_together_are_refused(tmp_path, config, eval_config) -> None:
    store = tmp_path / "s.db"
    one_line_error(build(config, store, "--eval", str(eval_config), "--val-size", "0.1"), "not both")
    assert not store.exists()


def test_the_report_shows_the_held_out_rows_in_a_browser(tmp_path, config, browser) -> None:
    """The report says what info and compose say: the eval mixture's rows, and that a training
    mixture leaves them out, read off the page as a reader sees it."""
    from dataidx.view import write_report

    store = tmp_path / "s.db"
    assert build(config, store, "--val-size", "0.25").exit_code == 0
    held = len(run_query(store, HELD_ROWS)[1])
    page = browser.new_page()
    for mixture, said in (("eval", f"{held} rows (every cut), which no other mixture draws"),
                          ("default", f"this mixture leaves out the {held} rows held out for evaluation in mixture "
                                      "'eval'")):
        write_report(store, tmp_path / f"{mixture}.html", mixture=mixture)
        page.goto((tmp_path / f"{mixture}.html").as_uri())
        assert page.inner_text("#mixture .held-out") == said + "."
    page.close()


def test_verify_names_a_training_mixture_altered_to_draw_a_held_out_row(tmp_path, config) -> None:
    """Disjointness is checked in SQL by verify over every position, not only kept by the draw: a
    position added by hand to a training mixture, on a row of the eval set, is named."""
    import sqlite3

    store = tmp_path / "s.db"
    assert build(config, store, "--val-size", "0.25").exit_code == 0
    assert CliRunner().invoke(cli, ["verify", str(store)]).exit_code == 0
    dataset, row = run_query(store, HELD_ROWS)[1][0]
    with sqlite3.connect(store) as connection:
        entry, = connection.execute('SELECT b.id FROM base_entries AS b JOIN datasets AS d ON d.id = b.dataset_id '
                                    'WHERE d.name = ? AND b."row" = ? LIMIT 1', (dataset, row)).fetchone()
        mixture, = connection.execute("SELECT id FROM mixtures WHERE name = 'default'").fetchone()
        last, = connection.execute("SELECT max(id) FROM mixture_positions").fetchone()
        connection.execute("INSERT INTO mixture_entries (id, mixture_id, entry_id) VALUES (?, ?, ?)",
                           (last + 1, mixture, entry))
    result = CliRunner().invoke(cli, ["verify", str(store)])
    assert result.exit_code != 0
    assert (f"mixture 'default' draws 1 position of rows held out for evaluation in mixture 'eval' (e.g. dataset "
            f"'{dataset}' row {row}); the store was altered: rebuild it") in result.output



def test_the_report_says_one_held_out_row_in_the_singular(tmp_path, config) -> None:
    from dataidx.view import write_report

    store = tmp_path / "s.db"
    assert build(config, store, "--val-size", "1").exit_code == 0
    write_report(store, tmp_path / "eval.html", mixture="eval")
    assert "1 row (every cut), which no other mixture draws." in (tmp_path / "eval.html").read_text()

"""Near duplicates (issue 55): on a planted corpus every planted copy is found and nothing else;
candidates are verified by exact Jaccard before anything is recorded (a pair LSH proposes that
does not verify is dropped); the same prompt with another answer is not a duplicate; the list is
stored with its evidence (the duplicates view), deletes nothing, and is removed whole; bad input
gets one line and writes nothing."""

from __future__ import annotations

import json
import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.dedup import find_duplicates
from dataidx.dedup.near import candidate_pairs, clusters, jaccard
from dataidx.dedup.shingles import ngram_hashes, word_hashes
from dataidx.index import build

from .helpers import REPO, one_line_error, write_jsonl, write_yaml

WORDS = [f"w{i}" for i in range(3000)]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def edited(rng: random.Random, text: str, changes: int) -> str:
    """``text`` with ``changes`` words replaced (a near copy)."""
    words = text.split()
    for at in rng.sample(range(len(words)), changes):
        words[at] = rng.choice(WORDS)
    return " ".join(words)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """300 alpaca rows in two datasets: exact copies, near copies, same prompts with other
    answers, and far edits (Jaccard well below 0.8); the truth by row of the first dataset."""
    rng = random.Random(7)
    folder = tmp_path_factory.mktemp("dedup")
    first = [{"instruction": sentence(rng, 30), "input": "", "output": sentence(rng, 80)} for _ in range(200)]
    second: list[dict[str, str]] = []
    truth: dict[str, Any] = {"exact": [], "near": [], "prompt_only": [], "far": []}
    for row in range(0, 40):
        second.append(dict(first[row]))
        truth["exact"].append(row)
    for row in range(40, 70):
        second.append({**first[row], "output": edited(rng, first[row]["output"], 2)})
        truth["near"].append(row)
    for row in range(70, 85):
        second.append({**first[row], "output": sentence(rng, 80)})
        truth["prompt_only"].append(row)
    for row in range(85, 100):
        second.append({"instruction": edited(rng, first[row]["instruction"], 10),
                       "output": edited(rng, first[row]["output"], 25), "input": ""})
        truth["far"].append(row)
    write_jsonl(folder / "first.jsonl", first)
    write_jsonl(folder / "second.jsonl", second)
    write_yaml(folder / "d.yaml", f"first:\n  path: {folder / 'first.jsonl'}\n  source: local\n  converter: alpaca\n"
                                  f"second:\n  path: {folder / 'second.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(folder / "d.yaml", folder / "d.db")
    return folder / "d.db", truth


def flagged(store: Path, name: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as connection:
        found = connection.execute("SELECT dataset, row, representative_dataset, representative_row, jaccard FROM "
                                   "duplicates WHERE run = ? ORDER BY entry_id", (name,)).fetchall()
    connection.close()
    return found


def test_every_planted_copy_is_found_and_nothing_else(planted: tuple[Path, dict[str, Any]]) -> None:
    store, truth = planted
    run = find_duplicates(store, "dups", jobs=2)
    found = flagged(store, "dups")
    second = {row: first for first, row in enumerate(truth["exact"] + truth["near"] + truth["prompt_only"]
                                                     + truth["far"])}
    expected = sorted(second[row] for row in truth["exact"] + truth["near"])
    assert [row for dataset, row, *_ in found] == expected and {one[0] for one in found} == {"second"}
    assert all(representative_dataset == "first" and representative_row == [
        row for row, at in second.items() if at == member][0] for _, member, representative_dataset,
        representative_row, _ in found)
    exact = {second[row] for row in truth["exact"]}
    assert all((jaccard == 1.0) == (member in exact) and jaccard >= 0.8 for _, member, _, _, jaccard in found)
    assert run.entries == 70 and run.params["flagged_rows"] == 70 and run.params["minhash"].startswith("rensa")
    with sqlite3.connect(store) as connection:  # nothing deleted
        assert connection.execute("SELECT count(*) FROM base_entries").fetchone() == (300,)
    connection.close()


def test_a_candidate_that_does_not_verify_is_dropped() -> None:
    texts = ["alpha beta gamma delta epsilon zeta eta theta iota kappa", "alpha beta gamma delta epsilon omega",
             "alpha beta gamma delta epsilon zeta eta theta iota kappa"]
    hashes, offsets = ngram_hashes(*word_hashes(texts), 5)
    sets = [np.unique(hashes[offsets[i]:offsets[i + 1]]) for i in range(3)]
    pairs = np.array([[0, 1], [0, 2], [1, 2]])  # as if LSH had proposed every pair

    def similar(one: int, other: int) -> float | None:
        found = jaccard(sets[one], sets[other])
        return found if found >= 0.8 else None

    assert [(one.row, one.representative, one.jaccard) for one in clusters(pairs, similar)] == [(2, 0, 1.0)]
    assert 0 < jaccard(sets[0], sets[1]) < 0.8


def test_lsh_pairs_rows_that_share_a_band() -> None:
    keys = np.array([[1, 5], [2, 5], [1, 6], [3, 7]], dtype=np.uint64)
    assert candidate_pairs(keys).tolist() == [[0, 1], [0, 2]]


def test_words_are_the_same_however_written() -> None:
    one, _ = word_hashes(["Hello, WORLD -- naïve café!"])
    other, _ = word_hashes(["hello world naïve Café"])
    assert one.tolist() == other.tolist() and len(one) == 4


def test_the_list_is_removed_whole_and_names_are_not_reused(planted: tuple[Path, dict[str, Any]],
                                                            tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(planted[0].read_bytes())
    runner = CliRunner()
    made = runner.invoke(cli, ["dedup", str(store), "--name", "d", "--jobs", "1"])
    assert made.exit_code == 0, made.output
    assert "70 duplicate rows of 300 (70 entries)" in made.stderr
    before = store.read_bytes()
    one_line_error(runner.invoke(cli, ["dedup", str(store), "--name", "d"]), "a list 'd' is there already")
    one_line_error(runner.invoke(cli, ["dedup", str(store), "--name", "e", "--threshold", "1.5"]), "--threshold 1.5")
    assert store.read_bytes() == before
    listed = runner.invoke(cli, ["evidence", str(store)])
    assert listed.exit_code == 0 and "d: near_duplicates, 70 entries" in listed.output
    assert runner.invoke(cli, ["evidence", str(store), "--remove", "d"]).exit_code == 0
    assert flagged(store, "d") == []
    one_line_error(runner.invoke(cli, ["evidence", str(store), "--remove", "d"]), "no evidence list 'd'")


def positions(store: Path, mixture: str) -> list[tuple[str, int, int | None]]:
    with sqlite3.connect(store) as connection:
        found = connection.execute("SELECT dataset, row, cut FROM entries WHERE mixture = ? ORDER BY position",
                                   (mixture,)).fetchall()
    connection.close()
    return found


def test_a_mixture_drawn_without_a_list_and_the_list_removed(planted: tuple[Path, dict[str, Any]],
                                                             tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(planted[0].read_bytes())  # the module's store may hold another test's list already
    folder = planted[0].parent
    write_yaml(tmp_path / "sized.yaml", "".join(
        f"{name}:\n  path: {folder / (name + '.jsonl')}\n  source: local\n  converter: alpaca\n  size: {size}\n"
        for name, size in (("first", 120), ("second", 50))))
    runner = CliRunner()
    mix = ["mix", str(store), str(tmp_path / "sized.yaml"), "--seed", "5"]
    assert runner.invoke(cli, [*mix, "--name", "before"]).exit_code == 0
    assert runner.invoke(cli, ["dedup", str(store), "--name", "listed", "-q"]).exit_code == 0
    listed = {(dataset, row) for dataset, row, *_ in flagged(store, "listed")}
    drawn = runner.invoke(cli, [*mix, "--name", "clean", "--exclude", "listed"])
    assert drawn.exit_code == 0 and "without lists listed" in drawn.stderr, drawn.output
    clean, before = positions(store, "clean"), positions(store, "before")
    assert len(clean) == 170 and not {(dataset, row) for dataset, row, _ in clean} & listed
    assert [one for one in clean if one[0] == "first"] == [one for one in before if one[0] == "first"]  # untouched
    assert {row for dataset, row, _ in clean if dataset == "second"} == set(range(70, 100))  # the 30 rows left
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT excludes FROM mixtures WHERE name = 'clean'").fetchone() == ('["listed"]',)
        assert connection.execute("SELECT excludes FROM mixtures WHERE name = 'before'").fetchone() == (None,)
    connection.close()
    assert runner.invoke(cli, ["evidence", str(store), "--remove", "listed"]).exit_code == 0
    one_line_error(runner.invoke(cli, [*mix, "--name", "again", "--exclude", "listed"]), "no evidence list 'listed'")
    assert runner.invoke(cli, [*mix, "--name", "restored"]).exit_code == 0
    assert positions(store, "restored") == before  # the list gone, the same draw as before it


@pytest.mark.slow  # a private PostgreSQL server
def test_the_same_answers_on_postgresql(planted: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from dataidx.dedup import find_leaks, parse_eval, read_eval
    from dataidx.store import run_query

    from .postgres_server import running_server

    store = tmp_path / "d.db"
    store.write_bytes(planted[0].read_bytes())
    folder = planted[0].parent
    write_jsonl(tmp_path / "eval.jsonl", [{"question": " ".join(json.loads(line)["output"].split()[:40])}
                                          for line in (folder / "first.jsonl").read_text().splitlines()[:5]])
    views = ("SELECT run, dataset, row, cut, representative_dataset, representative_row, representative_cut, jaccard "
             "FROM duplicates ORDER BY run, dataset, row, cut",
             "SELECT run, dataset, row, cut, eval_set, item, score, span FROM contamination ORDER BY dataset, row, cut",
             "SELECT digest, dataset, row, cut, copies, representative_dataset, representative_row, representative_cut "
             "FROM exact_duplicates ORDER BY entry_id",
             "SELECT digest, dataset, row, cut, entries, answers, messages FROM same_prompts ORDER BY entry_id")
    with running_server() as server:
        url = f"{server}&schema=dedup"
        build(folder / "d.yaml", url)
        for target in (store, url):
            find_duplicates(target, "pg_dups", jobs=1)  # type: ignore[arg-type]
            find_leaks(target, "pg_leaks", [read_eval(*parse_eval(f"bench={tmp_path / 'eval.jsonl'}"))])  # type: ignore[arg-type]
        for view in views:
            assert run_query(url, view)[1] == run_query(store, view)[1] and run_query(store, view)[1]


def test_compose_says_what_a_list_left_out(planted: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(planted[0].read_bytes())
    runner = CliRunner()
    assert runner.invoke(cli, ["dedup", str(store), "--name", "twins", "-q"]).exit_code == 0
    config = planted[0].parent / "d.yaml"
    assert runner.invoke(cli, ["mix", str(store), str(config), "--name", "clean", "--exclude", "twins"]).exit_code == 0
    said = runner.invoke(cli, ["compose", str(store), "--mixture", "clean"])
    assert said.exit_code == 0 and "drawn without list 'twins' (near_duplicates): second 70 rows, 70 entries" in \
        said.output, said.output
    assert "drawn without" not in runner.invoke(cli, ["compose", str(store), "--mixture", "default"]).output
    rendered = runner.invoke(cli, ["render", str(store), "--tokenizer", str(REPO / "data" / "demo_tokenizer"),
                                   "--cutoff", "4096", "-q"])
    assert rendered.exit_code == 0, rendered.output
    with sqlite3.connect(store) as connection:
        tokens = connection.execute("SELECT sum(l.tokens) FROM entry_lengths AS l JOIN duplicates AS x ON "
                                    "x.dataset = l.dataset AND x.row = l.row WHERE x.run = 'twins'").fetchone()[0]
    connection.close()
    said = runner.invoke(cli, ["compose", str(store), "--mixture", "clean", "--spec", "default"]).output
    assert f"second 70 rows, 70 entries, {tokens:,} tokens under spec 'default'" in said and tokens > 0


def test_a_ten_million_character_row_costs_bounded_memory(tmp_path: Path) -> None:
    """One row of 10M characters (1.7M words) among ordinary ones: dedup and decontamination
    finish, holding a few hundred MB at most (NumPy's arrays are traced)."""
    import tracemalloc

    from dataidx.dedup import find_leaks, parse_eval, read_eval

    rng = random.Random(11)
    rows = [{"instruction": sentence(rng, 20), "input": "", "output": sentence(rng, 40)} for _ in range(20)]
    huge = " ".join(rng.choice(WORDS) for _ in range(1_700_000))
    rows.append({"instruction": "summarise", "input": huge[:10_000_000], "output": "short"})
    write_jsonl(tmp_path / "big.jsonl", rows)
    write_yaml(tmp_path / "b.yaml", f"big:\n  path: {tmp_path / 'big.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "b.yaml", tmp_path / "b.db")
    write_jsonl(tmp_path / "eval.jsonl", [{"question": " ".join(huge.split()[500_000:500_030])}])
    tracemalloc.start()
    try:
        find_duplicates(tmp_path / "b.db", "d", jobs=1)
        run = find_leaks(tmp_path / "b.db", "l", [read_eval(*parse_eval(f"e={tmp_path / 'eval.jsonl'}"))], jobs=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.entries == 1 and peak < 1_500_000_000, peak


def test_a_text_past_the_kept_powers_hashes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Powers past the kept table are made for the one text (a 10M-character row is not kept in
    memory after it), and give the same hashes."""
    from dataidx.dedup.shingles import _Powers

    text = ["Alpha beta, GAMMA delta! " * 50]
    kept, _ = word_hashes(text)
    monkeypatch.setattr(_Powers, "KEPT", 64)
    monkeypatch.setattr(_Powers, "powers", np.zeros(0, dtype=np.uint64))
    monkeypatch.setattr(_Powers, "inverse", np.zeros(0, dtype=np.uint64))
    assert word_hashes(text)[0].tolist() == kept.tolist() and len(_Powers.powers) <= 64


def test_dedup_over_a_specs_stored_tokens_finds_the_planted_copies(planted: tuple[Path, dict[str, Any]],
                                                                   tmp_path: Path, tiny_tokenizer: Path) -> None:
    """--spec compares the token ids a spec stored: the same copies flagged as by words, nothing
    else; a spec that is not there, or stored no tokens, is one line and writes nothing."""
    store, truth = planted
    copy = tmp_path / "d.db"
    copy.write_bytes(store.read_bytes())
    runner = CliRunner()
    for name, extra in (("fetch", []), ("tok", ["--store-tokens"])):
        result = runner.invoke(cli, ["render", str(copy), "--tokenizer", str(tiny_tokenizer), "--cutoff", "4096",
                                     "--name", name, "-q", *extra])
        assert result.exit_code == 0, result.output
    run = find_duplicates(copy, "tokens", spec="tok", jobs=2)
    words = find_duplicates(copy, "words", jobs=1)
    assert [row[:4] for row in flagged(copy, "tokens")] == [row[:4] for row in flagged(copy, "words")]
    assert run.entries == words.entries == len(truth["exact"]) + len(truth["near"])
    assert run.params["units"] == "token ids of spec 'tok'" and run.params["spec"] == "tok"
    one_line_error(runner.invoke(cli, ["dedup", str(copy), "--name", "x", "--spec", "nope"]), "nope", "fetch")
    one_line_error(runner.invoke(cli, ["dedup", str(copy), "--name", "x", "--spec", "fetch"]), "fetch",
                   "--store-tokens")
    with closing(sqlite3.connect(copy)) as connection:
        assert connection.execute("SELECT count(*) FROM evidence_runs WHERE name = 'x'").fetchone() == (0,)

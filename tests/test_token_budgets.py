"""Mixtures by tokens and by epoch: budget draws, epochs with their own seeds, what they add up to."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import ConfigError, NotFoundError, UsageError
from dataidx.index import Lengths, add_mixture, budget_draw, epoch_seed
from dataidx.pack import pack_store
from dataidx.read import verify_store
from dataidx.render import RenderRequest, render_store
from dataidx.store import composition, run_query
from dataidx.training import PackedDataset

from .helpers import engine_length, examples, write_jsonl, write_yaml

pytest.importorskip("transformers")


def query(store: Path, sql: str, *parameters) -> list[tuple]:
    with sqlite3.connect(store) as connection:
        return connection.execute(sql, parameters).fetchall()


# -- the draw ---------------------------------------------------------------------------------

lengths_and_trains = st.lists(st.tuples(st.integers(0, 60), st.booleans()), min_size=1, max_size=80)


@settings(max_examples=examples(300))
@given(entries=lengths_and_trains, budget=st.integers(1, 6000), seed=st.integers(0, 2**63 - 1))
def test_a_budget_is_met_within_half_an_entry_by_entries_that_train(entries, budget: int, seed: int) -> None:
    lengths = np.array([length for length, _ in entries], dtype=np.int32)
    trains = np.array([train for _, train in entries], dtype=bool)
    eligible = trains & (lengths > 0)
    if not eligible.any():
        with pytest.raises(UsageError, match="no entry trains"):
            budget_draw(Lengths(lengths, trains), budget, seed, dataset="d")
        return
    chosen = budget_draw(Lengths(lengths, trains), budget, seed)
    counts = chosen.counts()
    total = int(np.dot(counts, lengths))
    assert abs(total - budget) * 2 <= int(lengths[eligible].max())  # the closest one more entry allows
    assert not counts[~eligible].any()  # nothing that does not train, or counts nothing
    passes = budget // int(lengths[eligible].sum())
    assert set(counts[eligible].tolist()) <= {passes, passes + 1}  # whole passes first, then distinct
    assert np.array_equal(chosen.offsets(), budget_draw(Lengths(lengths, trains), budget, seed).offsets())


def test_a_budget_no_entry_can_meet_names_commands_that_exist() -> None:
    with pytest.raises(UsageError) as raised:
        budget_draw(Lengths(np.array([5, 0]), np.array([False, True])), 10, seed=0, dataset="d")
    named = re.findall(r"dataidx ([a-z][a-z-]*)", str(raised.value))
    assert named == ["info"] and all(command in cli.commands for command in named)


def test_a_tie_goes_to_the_entry_that_meets_the_budget() -> None:
    # Either entry alone leaves the budget 5 away: under (stopping short) or over (taking it).
    chosen = budget_draw(Lengths(np.array([10]), np.array([True])), 5, seed=0)
    assert chosen.offsets().tolist() == [0]


def test_the_same_seed_draws_the_same_entries_in_another_process() -> None:
    program = ("import hashlib, numpy as np; from dataidx.index import Lengths, budget_draw; "
               "lengths = np.arange(1, 5001, dtype=np.int32) % 97 + 1; "
               "chosen = budget_draw(Lengths(lengths, lengths % 5 > 0), 123_456, seed=2**40 + 7); "
               "print(hashlib.sha256(chosen.offsets().tobytes()).hexdigest())")
    here = np.arange(1, 5001, dtype=np.int32) % 97 + 1
    expected = hashlib.sha256(budget_draw(Lengths(here, here % 5 > 0), 123_456, seed=2**40 + 7).offsets().tobytes())
    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout.strip()
    assert found == expected.hexdigest()


def test_epoch_zero_draws_with_the_mixture_seed_and_later_epochs_with_their_own() -> None:
    assert epoch_seed(42, 0) == 42 and epoch_seed(-5, 0) == -5
    seeds = {epoch_seed(42, k) for k in range(1, 50)}
    assert len(seeds) == 49 and all(0 <= seed < 2**63 for seed in seeds)


# -- in a store -------------------------------------------------------------------------------

def rows(count: int) -> list[dict]:
    """Alpaca rows of varied lengths; every seventh answer is long, so a cutoff of 48 drops it."""
    return [{"instruction": f"question {i} " + "hello " * (i % 5), "input": "",
             "output": ("The answer is 42. " * (20 if i % 7 == 0 else 1)).strip()} for i in range(count)]


def chats(count: int) -> list[dict]:
    return [{"conversations": [{"from": "human", "value": f"hello {i}"},
                               {"from": "gpt", "value": "fine " * (i % 4 + 1)},
                               {"from": "human", "value": "and?"}, {"from": "gpt", "value": "The answer is 42."}]}
            for i in range(count)]


def datasets_yaml(folder: Path, qa: str = "", chat: str = "", more: str = "") -> str:
    return (f"qa:\n  path: {folder / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n{qa}"
            f"chat:\n  path: {folder / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n{chat}{more}")


@pytest.fixture
def store(tmp_path: Path, make_store, tiny_tokenizer: Path) -> Path:
    write_jsonl(tmp_path / "qa.jsonl", rows(60))
    write_jsonl(tmp_path / "chat.jsonl", chats(30))
    write_jsonl(tmp_path / "extra.jsonl", rows(10))
    built = make_store(datasets_yaml(tmp_path))
    render_store(RenderRequest(built, tiny_tokenizer, cutoff=48, truncation="drop"))
    return built


def budgets(tmp_path: Path, name: str = "budgets.yaml", more: str = "") -> Path:
    return write_yaml(tmp_path / name, datasets_yaml(tmp_path, "  tokens: 700\n", "  supervised_tokens: 900\n", more))


def drawn(store: Path, mixture: str, epoch: int, dataset: str) -> list[tuple]:
    return query(store, "SELECT position, row, cut FROM entries WHERE mixture = ? AND epoch = ? AND dataset = ? "
                        "ORDER BY position", mixture, epoch, dataset)


def test_budgets_are_drawn_under_the_spec_and_recorded(tmp_path: Path, store: Path) -> None:
    summary = add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", seed=3)
    assert summary.spec == "default" and summary.epochs == 1
    fingerprint = query(store, "SELECT fingerprint FROM render_specs WHERE name = 'default'")[0][0]
    assert query(store, "SELECT spec, spec_fingerprint, epochs FROM mixtures WHERE name = 'by_tokens'") == \
        [("default", fingerprint, 1)]
    assert query(store, "SELECT d.name, md.token_budget, md.supervised_token_budget, md.size, md.requested "
                        "FROM mixture_datasets AS md JOIN datasets AS d ON d.id = md.dataset_id "
                        "JOIN mixtures AS m ON m.id = md.mixture_id WHERE m.name = 'by_tokens' "
                        "ORDER BY d.position") == \
        [("qa", 700, None, None, None), ("chat", None, 900, None, None)]
    longest = dict(query(store, "SELECT dataset, max(tokens) FROM entry_lengths WHERE status = 'ok' GROUP BY dataset"))
    most_supervised = query(store, "SELECT max(supervised_tokens) FROM entry_lengths WHERE dataset = 'chat'")[0][0]
    spent = {dataset: (tokens, supervised) for _, _, dataset, _, tokens, supervised, _ in
             query(store, "SELECT * FROM token_composition WHERE mixture = 'by_tokens'")}
    assert abs(spent["qa"][0] - 700) * 2 <= longest["qa"]
    assert abs(spent["chat"][1] - 900) * 2 <= most_supervised
    # Nothing that does not train under the spec was drawn (qa has 9 too_long entries).
    assert query(store, "SELECT count(*) FROM entries AS e JOIN entry_lengths AS l ON l.spec = 'default' AND "
                        "l.dataset = e.dataset AND l.row = e.row AND coalesce(l.cut, -1) = coalesce(e.cut, -1) "
                        "WHERE e.mixture = 'by_tokens' AND l.status NOT IN ('ok', 'truncated')") == [(0,)]
    assert query(store, "SELECT count(*) FROM entry_lengths WHERE status = 'too_long'") == [(9,)]
    assert verify_store(store)["ok"]


def test_compose_counts_tokens_under_any_spec_as_the_mixture_recorded_them(tmp_path: Path, store: Path,
                                                                          tiny_tokenizer: Path) -> None:
    add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", epochs=2)
    # same lengths, counted live
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop", name="again"))
    for epoch in (None, 0, 1):
        stored = composition(store, "by_tokens", epoch=epoch, spec="default")
        counted = composition(store, "by_tokens", epoch=epoch, spec="again")
        assert stored == counted and {row["dataset"] for row in stored} == {"qa", "chat"}
        assert sum(row["share_of_tokens"] for row in stored) == pytest.approx(1, abs=1e-5)
    by_epoch = [composition(store, "by_tokens", epoch=k, spec="default") for k in (0, 1)]
    whole = composition(store, "by_tokens", spec="default")
    for key in ("entries", "tokens", "supervised_tokens", "training_entries"):
        assert [row[key] for row in whole] == [a[key] + b[key] for a, b in zip(*by_epoch)]
    _, rows_ = run_query(store, "SELECT epoch, dataset, entries, tokens FROM token_composition "
                                "WHERE mixture = 'by_tokens' ORDER BY epoch, dataset")
    assert [(e, d, n, t) for e, d, n, t in rows_] == sorted(
        (k, row["dataset"], row["training_entries"], row["tokens"]) for k in (0, 1) for row in by_epoch[k])
    result = CliRunner().invoke(cli, ["compose", str(store), "--mixture", "by_tokens", "--spec", "default",
                                      "--epoch", "1"])
    assert result.exit_code == 0 and "share_of_tokens" in result.output and "coverage" in result.output


def test_epochs_differ_and_each_is_reproducible_alone(tmp_path: Path, store: Path) -> None:
    config = write_yaml(tmp_path / "shrunk.yaml", datasets_yaml(tmp_path, "  size: 20\n", "  weight: 2.5\n"))
    add_mixture(store, config, "three", seed=9, epochs=3)
    add_mixture(store, config, "one", seed=9)
    add_mixture(store, config, "three_again", seed=9, epochs=3)
    add_mixture(store, budgets(tmp_path), "tokens", spec="default", seed=9, epochs=3)
    for dataset in ("qa", "chat"):
        epochs = [drawn(store, "three", k, dataset) for k in range(3)]
        assert len({tuple(rows_) for rows_ in epochs}) == 3  # a shrunk one shows other rows, a grown one repeats others
        assert epochs == [drawn(store, "three_again", k, dataset) for k in range(3)]
        assert epochs[0] == drawn(store, "one", 0, dataset)  # epoch 0 is the mixture of one epoch
        assert len({tuple(drawn(store, "tokens", k, dataset)) for k in range(3)}) == 3
    coverage = {row["dataset"]: row for row in composition(store, "three")}
    assert (coverage["qa"]["distinct_rows"] > 20
            and coverage["qa"]["coverage"] == pytest.approx(coverage["qa"]["distinct_rows"] / 60, abs=1e-6))
    assert verify_store(store)["ok"]
    never_seen = run_query(store, "SELECT count(*) FROM turns AS t WHERE t.dataset = 'qa' AND NOT EXISTS ("
                                  "SELECT 1 FROM entries AS e WHERE e.mixture = 'three' AND e.dataset = t.dataset "
                                  "AND e.row = t.row)")[1][0][0]
    assert never_seen == 60 - coverage["qa"]["distinct_rows"]


def test_adding_a_dataset_leaves_the_others_draws_unchanged(tmp_path: Path, store: Path, make_store,
                                                           tiny_tokenizer: Path) -> None:
    extra = f"extra:\n  path: {tmp_path / 'extra.jsonl'}\n  source: local\n  converter: alpaca\n  tokens: 90\n"
    bigger = make_store(datasets_yaml(tmp_path, more=extra))
    render_store(RenderRequest(bigger, tiny_tokenizer, cutoff=48, truncation="drop"))
    add_mixture(store, budgets(tmp_path), "m", spec="default", epochs=2)
    add_mixture(bigger, budgets(tmp_path, "more.yaml", extra), "m", spec="default", epochs=2)
    for epoch in (0, 1):
        for dataset in ("qa", "chat"):
            assert ([r[1:] for r in drawn(store, "m", epoch, dataset)]
                    == [r[1:] for r in drawn(bigger, "m", epoch, dataset)])
        assert drawn(bigger, "m", epoch, "extra")


def test_budgets_need_a_spec_and_exact_draws(tmp_path: Path, store: Path) -> None:
    result = CliRunner().invoke(cli, ["mix", str(store), str(budgets(tmp_path)), "--name", "x"])
    assert result.exit_code != 0 and result.output.count("\n") == 1
    assert "dataset 'qa': key 'tokens' is a token budget" in result.output and "--spec" in result.output
    with pytest.raises(UsageError, match="--sampling replacement"):
        add_mixture(store, budgets(tmp_path), "x", spec="default", sampling="replacement")
    with pytest.raises(NotFoundError, match="no render spec .nope."):
        add_mixture(store, budgets(tmp_path), "x", spec="nope")
    both = write_yaml(tmp_path / "both.yaml", datasets_yaml(tmp_path, "  tokens: 10\n  size: 3\n",
                                                            "  tokens: 0\n  supervised_tokens: 5\n"))
    with pytest.raises(ConfigError) as error:
        add_mixture(store, both, "x", spec="default")
    assert "dataset 'qa': key 'tokens' is a token budget and 'size' counts entries" in str(error.value)
    assert "dataset 'chat': key 'tokens' must be an integer > 0" in str(error.value)
    assert "dataset 'chat': keys 'tokens' and 'supervised_tokens' are two budgets" in str(error.value)
    assert query(store, "SELECT name FROM mixtures") == [("default",)]  # nothing written


def test_a_build_takes_budgeted_datasets_whole_and_says_so(tmp_path: Path, store: Path) -> None:
    output = tmp_path / "whole.db"
    result = CliRunner().invoke(cli, ["build", str(budgets(tmp_path)), "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert "note: qa, chat have token budgets" in result.output and "--spec SPEC" in result.output
    assert query(output, "SELECT count(*) FROM entries") == query(output, "SELECT count(*) FROM base_entries")


@pytest.mark.slow
def test_engines_serve_each_epoch_in_dataloader_workers(tmp_path: Path, store: Path) -> None:
    from torch.utils.data import DataLoader

    add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", epochs=3, seed=1)
    with DataEngine(store, "by_tokens") as engine:
        with DataEngine(store, "by_tokens", render="default", epoch=2) as rendered:
            loader = DataLoader(engine, batch_size=4, num_workers=2, multiprocessing_context="fork", collate_fn=list)
            for epoch in range(3):
                engine.set_epoch(epoch)
                served = [(s["_dataset_name"], s["messages"]) for batch in loader for s in batch]
                expected = query(store, "SELECT dataset, row, cut FROM entries WHERE mixture = 'by_tokens' "
                                        "AND epoch = ? ORDER BY position", epoch)
                assert len(served) == len(engine) == len(expected)
                assert [name for name, _ in served] == [dataset for dataset, _, _ in expected]
                assert [engine.reader.entry(i) for i in range(len(engine))] == expected
            assert len(rendered) == engine_length(store, "by_tokens", epoch=2)  # only training entries were drawn
            with DataEngine(store, "by_tokens", epoch=2) as second:
                assert "epoch=2" in repr(second)
            with pytest.raises(LookupError, match="has epochs 0-2, not epoch 3"):
                DataEngine(store, "by_tokens", epoch=3)  # an epoch named by the user is one the mixture has
            engine.set_epoch(4)  # a trainer's per-epoch call past the stored ones serves epoch 4 % 3
            assert engine.epoch == 1 and [engine.reader.entry(i) for i in range(len(engine))] == query(
                store, "SELECT dataset, row, cut FROM entries WHERE mixture = 'by_tokens' AND epoch = 1 "
                       "ORDER BY position")


@pytest.mark.slow
def test_a_plan_per_epoch(tmp_path: Path, store: Path) -> None:
    add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", epochs=2, seed=1)
    summary = pack_store(store, "default", capacity=64, mixture="by_tokens", name="p", seed=5)
    epochs = query(store, "SELECT epoch, seed, first_pack, packs, entries FROM plan_epochs ORDER BY epoch")
    assert [row[1] for row in epochs] == [5, epoch_seed(5, 1)]
    assert epochs[1][2] == epochs[0][3] and summary.packs == epochs[0][3] + epochs[1][3]
    with PackedDataset(store, "p") as packs:
        for epoch, _, _, count, entries in epochs:
            packs.set_epoch(epoch)
            assert len(packs) == count
            positions = sorted(p for (p,) in query(store, "SELECT position FROM pack_members "
                                                          "WHERE plan = 'p' AND epoch = ?", epoch))
            assert positions == list(range(entries))  # every position of the epoch once (all train)
            assert sum(len(packs[i]) for i in range(len(packs))) == entries
        assert query(store, "SELECT min(pack), max(pack) FROM pack_members WHERE epoch = 1") == [(0, epochs[1][3] - 1)]


def test_verify_recounts_each_epoch(tmp_path: Path, store: Path) -> None:
    add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", epochs=2)
    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE epoch_datasets SET distinct_rows = distinct_rows + 1 WHERE epoch = 1")
    report = verify_store(store)
    assert not report["ok"] and "mixture 'by_tokens (epoch 1)'" in json.dumps(report)


def test_a_budget_over_a_store_with_held_out_rows_counts_and_draws_only_the_rest(tmp_path: Path, make_store,
                                                                                tiny_tokenizer: Path) -> None:
    """``build --val-size`` then a token-budget mixture (refused before): the budget is met from
    the rows not held out, none of whose cuts is ever drawn, as a size or weight draw keeps them out."""
    write_jsonl(tmp_path / "qa.jsonl", rows(60))
    write_jsonl(tmp_path / "chat.jsonl", chats(30))
    store = make_store(datasets_yaml(tmp_path), val_size=0.3)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop"))
    add_mixture(store, budgets(tmp_path), "by_tokens", spec="default", seed=3, epochs=2)
    overlap = query(store, "SELECT count(*) FROM entries AS t JOIN (SELECT DISTINCT dataset, \"row\" FROM entries "
                           "WHERE mixture = 'eval') AS e ON e.dataset = t.dataset AND e.\"row\" = t.\"row\" "
                           "WHERE t.mixture = 'by_tokens'")
    assert overlap == [(0,)] and query(store, "SELECT count(*) FROM entries WHERE mixture = 'eval'")[0][0] > 0
    longest = dict(query(store, "SELECT dataset, max(tokens) FROM entry_lengths WHERE status = 'ok' GROUP BY dataset"))
    most_supervised = query(store, "SELECT max(supervised_tokens) FROM entry_lengths WHERE dataset = 'chat'")[0][0]
    for epoch in (0, 1):
        spent = {dataset: (tokens, supervised) for _, _, dataset, _, tokens, supervised, _ in
                 query(store, "SELECT * FROM token_composition WHERE mixture = 'by_tokens' AND epoch = ?", epoch)}
        assert abs(spent["qa"][0] - 700) * 2 <= longest["qa"] and abs(spent["chat"][1] - 900) * 2 <= most_supervised
    assert verify_store(store)["ok"]

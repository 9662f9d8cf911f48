"""Lengths and packing plans in the store: dataidx render, dataidx pack, the rendered engine,
packed datasets and the collator, checked against the store's own views."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import StaleStoreError, StoreError
from dataidx.index import add_mixture
from dataidx.pack import pack_store
from dataidx.render import IGNORE, RenderRequest, render_store
from dataidx.store import remove_mixture
from dataidx.store.specs.rows import SpecLengths
from dataidx.training import Collator, PackedDataset, block_causal_mask

from .helpers import REPO, engine_length, engine_samples, train_tokenizer, write_jsonl

pytest.importorskip("transformers")


def rows(count: int) -> list[dict]:
    """Alpaca rows of varied lengths; every seventh answer is long, so a small cutoff bites."""
    return [{"instruction": f"question {i} " + "hello " * (i % 5), "input": "",
             "output": ("The answer is 42. " * (20 if i % 7 == 0 else 1)).strip()} for i in range(count)]


@pytest.fixture
def store(tmp_path: Path, make_store) -> Path:
    write_jsonl(tmp_path / "qa.jsonl", rows(60))
    write_jsonl(tmp_path / "chat.jsonl", [{"conversations": [
        {"from": "human", "value": f"hello {i}"}, {"from": "gpt", "value": "I am fine, thanks."},
        {"from": "human", "value": "how are you?"}, {"from": "gpt", "value": "The answer is 42."}]}
        for i in range(20)])
    return make_store(
        f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n"
        f"chat:\n  path: {tmp_path / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n  weight: 2\n"
    )


def query(store: Path, sql: str, *parameters) -> list[tuple]:
    with sqlite3.connect(store) as connection:
        return connection.execute(sql, parameters).fetchall()


def test_render_stores_a_status_for_every_entry_and_reuses_an_unchanged_spec(store: Path, tiny_tokenizer: Path) -> None:
    summary = render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop", jobs=2))
    base = query(store, "SELECT count(*) FROM base_entries")[0][0]
    assert summary.entries == base == query(store, "SELECT count(*) FROM entry_lengths WHERE spec = 'default'")[0][0]
    reasons = dict(query(store, "SELECT status, count(*) FROM entry_lengths GROUP BY status"))
    assert reasons["too_long"] == 9 and reasons["ok"] == base - 9 == summary.kept
    assert query(store, "SELECT detail FROM entry_lengths WHERE status = 'too_long' "
                        "LIMIT 1")[0][0].endswith("cutoff 48")
    # One process or two: the same lengths.
    single = render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop", jobs=1, name="single"))
    assert not single.reused
    assert query(store, "SELECT tokens, supervised_tokens, status FROM entry_lengths WHERE spec = 'default'") == \
        query(store, "SELECT tokens, supervised_tokens, status FROM entry_lengths WHERE spec = 'single'")
    again = render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop"))
    assert again.reused and again.kept == summary.kept


def test_a_changed_tokenizer_never_reuses_lengths(tmp_path: Path, store: Path) -> None:
    from dataidx.render import CHATML

    folder = tmp_path / "tok"
    train_tokenizer(folder, chat_template=CHATML)
    render_store(RenderRequest(store, folder, cutoff=4096))
    engine_samples(store, render="default")[0]
    train_tokenizer(folder, chat_template=CHATML, vocab_size=300)  # retrained in place: other ids
    with pytest.raises(StaleStoreError, match="tokenizer .* changed"):
        DataEngine(store, render="default")
    fingerprint = query(store, "SELECT fingerprint FROM render_specs")[0][0]
    assert not render_store(RenderRequest(store, folder, cutoff=4096)).reused
    assert query(store, "SELECT fingerprint FROM render_specs")[0][0] != fingerprint
    assert engine_length(store, render="default") > 0


def test_a_spec_from_before_v1s_labels_is_refused_until_rendered_again(store: Path, tiny_tokenizer: Path) -> None:
    import hashlib

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096))
    # What dataidx 0.1.0 stored: the same fields, hashed without the label rule.
    token, template, cutoff, truncation = query(
        store, "SELECT tokenizer_sha256, template_text, cutoff, truncation FROM render_specs")[0]
    old = hashlib.sha256(json.dumps([token, template, cutoff, truncation, "0.1.0"]).encode()).hexdigest()
    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE render_specs SET fingerprint = ?, dataidx_version = '0.1.0'", (old,))
    connection.close()
    with pytest.raises(StaleStoreError, match="made by dataidx 0.1.0.*run dataidx render again"):
        DataEngine(store, render="default")
    assert not render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096)).reused
    assert engine_length(store, render="default") > 0


def test_the_rendered_engine_serves_training_entries_only(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, truncation="drop"))
    with DataEngine(store, render="default") as engine:
        with DataEngine(store) as plain:
            trains = query(store, "SELECT count(*) FROM entries AS e JOIN entry_lengths AS l ON l.dataset = e.dataset "
                                  "AND l.row = e.row AND l.cut IS e.cut "
                                  "WHERE l.status = 'ok' AND e.mixture = 'default'")[0][0]
            assert len(engine) == trains < len(plain)
            samples = engine[0:len(engine)]
            assert all(len(s["input_ids"]) <= 48 and set(s) >= {"input_ids", "labels", "loss_weights", "attention_mask"}
                       for s in samples)
            assert engine[-1] == samples[-1]
            with pytest.raises(IndexError):
                engine[len(engine)]


def test_pack_plans_every_training_position_once_within_capacity(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64, truncation="right"))
    summary = pack_store(store, "default", capacity=128, seed=3)
    members = query(store, "SELECT pack, slot, position, tokens FROM pack_members WHERE plan = 'default'")
    positions = [m[2] for m in members]
    training = query(store, "SELECT e.position, l.tokens FROM entries AS e JOIN entry_lengths AS l ON "
                            "l.dataset = e.dataset AND l.row = e.row AND l.cut IS e.cut "
                            "WHERE e.mixture = 'default' AND l.status IN ('ok', 'truncated')")
    assert sorted(positions) == sorted(p for p, _ in training)  # every training position exactly once
    assert dict((p, t) for _, _, p, t in members) == dict(training)
    per_pack: dict[int, int] = {}
    for pack, _, _, tokens in members:
        per_pack[pack] = per_pack.get(pack, 0) + tokens
    assert max(per_pack.values()) <= 128 and len(per_pack) == summary.packs
    plan = query(store, "SELECT spec, mixture, capacity, seed, packs, entries, fill, left_out FROM pack_plans")[0]
    left_out = query(store, "SELECT count(*) FROM entries WHERE mixture = 'default'")[0][0] - len(training)
    assert plan == ("default", "default", 128, 3, summary.packs, len(training),
                    pytest.approx(sum(per_pack.values()) / (128 * len(per_pack))), left_out)
    # The same seed gives the same plan; another seed another order of the same packs.
    pack_store(store, "default", capacity=128, seed=3, name="again")
    pack_store(store, "default", capacity=128, seed=4, name="other")
    plans = {name: query(store, "SELECT pack, slot, position FROM pack_members WHERE plan = ? ORDER BY 1, 2", name)
             for name in ("default", "again", "other")}
    assert plans["default"] == plans["again"] != plans["other"]
    as_sets = {name: sorted(sorted(p for k, _, p in plan if k == pack) for pack in {k for k, _, _ in plan})
               for name, plan in plans.items()}
    assert as_sets["default"] == as_sets["other"]


def test_pack_refuses_entries_longer_than_capacity(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096))
    longest = query(store, "SELECT max(tokens) FROM entry_lengths")[0][0]
    with pytest.raises(StoreError, match=f"longer than capacity 64 \\(longest {longest} tokens\\)"):
        pack_store(store, "default", capacity=64)
    with pytest.raises(StoreError, match="no render spec 'nope'"):
        pack_store(store, "nope", capacity=64)
    assert query(store, "SELECT count(*) FROM packing_plans")[0][0] == 0


def test_pack_looking_up_a_few_positions_at_a_time_plans_the_same(store: Path, tiny_tokenizer: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64, truncation="drop"))  # some entries do not train
    pack_store(store, "default", capacity=128, seed=5)
    monkeypatch.setattr("dataidx.pack.plans.POSITIONS_PER_CHUNK", 3)
    monkeypatch.setattr("dataidx.pack.epoch_items.POSITIONS_PER_CHUNK", 3)
    pack_store(store, "default", capacity=128, seed=5, name="chunked")
    plans = [query(store, "SELECT pack, slot, position, tokens FROM pack_members WHERE plan = ? "
                          "ORDER BY pack, slot", name) for name in ("default", "chunked")]
    members = [query(store, "SELECT position, entry_id FROM packed_entries WHERE plan_id = "
                            "(SELECT id FROM packing_plans WHERE name = ?) ORDER BY id", name)
               for name in ("default", "chunked")]
    assert plans[0] == plans[1] and plans[0] and members[0] == members[1]
    assert query(store, "SELECT count(*) FROM entry_lengths WHERE status NOT IN ('ok', 'truncated')")[0][0] > 0


def test_pack_refuses_a_store_whose_members_end_at_the_largest_id(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64))
    with sqlite3.connect(store) as connection:
        connection.execute("INSERT INTO packed_entries (id, plan_id, position, entry_id) VALUES (?, 9, 0, 1)",
                           (2**63 - 1,))
    before = store.read_bytes()
    with pytest.raises(StoreError, match=f"no room for [0-9]+ more members after id {2**63 - 1}$"):
        pack_store(store, "default", capacity=128)
    assert store.read_bytes() == before and not list(store.parent.glob(f".{store.name}*"))


def test_pack_plans_while_the_store_is_copied_and_a_failure_of_either_loses_nothing(
        store: Path, tiny_tokenizer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import threading

    from dataidx.pack import epoch_items

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64))
    planning, copy = threading.Event(), shutil.copyfile

    def copy_once_planning(source, target):  # a copy made before planning began waits in vain
        assert planning.wait(30), "the store was copied before planning began"
        return copy(source, target)

    def plan(*args, **kwargs):
        planning.set()
        return assign_bins(*args, **kwargs)

    assign_bins = epoch_items.assign_bins
    monkeypatch.setattr("dataidx.store.sqlite.files.shutil.copyfile", copy_once_planning)
    monkeypatch.setattr("dataidx.pack.epoch_items.assign_bins", plan)
    assert pack_store(store, "default", capacity=128).packs > 0
    before = store.read_bytes()

    def failing(*args, **kwargs):
        raise StoreError("planning failed (injected)")

    monkeypatch.setattr("dataidx.pack.epoch_items.assign_bins", failing)
    with pytest.raises(StoreError, match="planning failed"):
        pack_store(store, "default", capacity=128, name="second")
    monkeypatch.setattr("dataidx.pack.epoch_items.assign_bins", plan)

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dataidx.store.sqlite.files.shutil.copyfile", full_disk)
    with pytest.raises(StoreError, match="cannot write: No space left on device"):
        pack_store(store, "default", capacity=128, name="second")
    assert store.read_bytes() == before and not list(store.parent.glob(f".{store.name}*"))


@pytest.mark.slow
def test_packed_dataset_and_collator(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64, truncation="left"))
    pack_store(store, "default", capacity=160, seed=0)
    with PackedDataset(store) as packs:
        members = query(store, "SELECT pack, count(*), sum(tokens) FROM pack_members GROUP BY pack ORDER BY pack")
        assert len(packs) == len(members)
        collate = Collator(pad_token_id=2)  # the pad id is EOS's, which is supervised: padding must go by length
        batch = collate([packs[0], packs[1]])
        for row, (_, count, tokens) in enumerate(members[:2]):
            pack = packs[row]
            assert len(pack) == count and sum(len(s["input_ids"]) for s in pack) == tokens
            starts = np.cumsum([0] + [len(s["input_ids"]) for s in pack])
            positions = batch["position_ids"][row].tolist()
            for number, (start, sample) in enumerate(zip(starts, pack)):
                length = len(sample["input_ids"])
                assert positions[start : start + length] == list(range(length))
                assert batch["input_ids"][row, start : start + length].tolist() == sample["input_ids"]
                expected = sample["labels"] if number == 0 else [IGNORE] + sample["labels"][1:]
                assert batch["labels"][row, start : start + length].tolist() == expected
            assert batch["labels"][row, tokens:].eq(IGNORE).all() and batch["attention_mask"][row, tokens:].eq(0).all()
        # cu_seq_lens cuts the flattened batch into whole samples and whole stretches of padding.
        flat_ids, flat_owner = batch["input_ids"].view(-1).tolist(), batch["sample_ids"].view(-1).tolist()
        bounds = batch["cu_seq_lens"].tolist()
        assert bounds[0] == 0 and bounds[-1] == len(flat_ids)
        samples = [s["input_ids"] for pack in (packs[0], packs[1]) for s in pack]
        segments = [(flat_ids[a:b], set(flat_owner[a:b])) for a, b in zip(bounds, bounds[1:])]
        assert [ids for ids, owners in segments if owners != {0}] == samples
        assert all(len(owners) == 1 for _, owners in segments)
        assert batch["max_length"] == max(b - a for a, b in zip(bounds, bounds[1:]))
        mask = block_causal_mask(batch["sample_ids"])
        ids = batch["sample_ids"]
        for row in range(2):
            for q in range(ids.shape[1]):
                allowed = mask[row, 0, q].nonzero().flatten().tolist()
                assert all(ids[row, k] == ids[row, q] > 0 and k <= q for k in allowed)  # never another sample
        loader = torch.utils.data.DataLoader(packs, batch_size=2, num_workers=2, collate_fn=collate)
        assert (sum(int(b["attention_mask"].sum()) for b in loader)
                == query(store, "SELECT sum(tokens) FROM pack_members")[0][0])


def test_padded_batches_pad_labels_by_length(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096))
    with DataEngine(store, render="default") as engine:
        samples = engine[[0, 1, 2]]
        eos = 2
        batch = Collator(pad_token_id=eos)(samples)
        for row, sample in enumerate(samples):
            n = len(sample["labels"])
            assert batch["labels"][row, :n].tolist() == sample["labels"]
            assert sample["labels"][-1] == IGNORE or batch["labels"][row, n - 1] != IGNORE
            assert batch["labels"][row, n:].eq(IGNORE).all() and batch["loss_weights"][row, n:].eq(0).all()
        assert batch["attention_mask"].sum(1).tolist() == [len(s["input_ids"]) for s in samples]


def test_plans_go_with_their_mixture_and_spec(tmp_path: Path, store: Path, tiny_tokenizer: Path) -> None:
    config = tmp_path / "mix.yaml"
    config.write_text(f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n  size: 10\n")
    add_mixture(store, config, "small", seed=1)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096))
    pack_store(store, "default", capacity=4096, mixture="small", name="small-plan")
    pack_store(store, "default", capacity=4096, name="big-plan")
    assert query(store, "SELECT mixture, entries FROM pack_plans ORDER BY plan") == [("default", 140), ("small", 10)]
    remove_mixture(store, "small")
    assert query(store, "SELECT plan FROM pack_plans") == [("big-plan",)]
    # new lengths: old plans are stale
    summary = render_store(RenderRequest(store, tiny_tokenizer, cutoff=512, replace=True))
    assert summary.plans_removed == 1 and query(store, "SELECT count(*) FROM packed_entries")[0][0] == 0


def test_cli_render_pack_show(store: Path, tiny_tokenizer: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["render", str(store), "--tokenizer", str(tiny_tokenizer), "--template", "llama3",
                                 "--cutoff", "48", "--truncation", "right", "--name", "l3", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert "rendered entries 100/100 (100%)" in result.stderr and "as spec 'l3'" in result.stderr
    result = runner.invoke(cli, ["pack", str(store), "--spec", "l3", "--capacity", "96", "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert "plan 'default'" in result.stderr and "% full" in result.stderr
    result = runner.invoke(cli, ["show", str(store), "0", "-1", "--render", "l3"])
    assert result.exit_code == 0, result.output
    shown = [json.loads(line) for line in result.stdout.splitlines()]
    assert [s["_dataset_name"] for s in shown] == ["qa", "chat"]
    assert set(shown[0]) >= {"status", "input_ids", "labels", "loss_weights", "attention_mask"}
    for arguments, message in [
        (["render", str(store), "--tokenizer", str(store.parent / "none"), "--cutoff", "8"], "tokenizer not found"),
        (["render", str(store), "--tokenizer", str(tiny_tokenizer), "--template", "vicuna", "--cutoff", "8"],
         "unknown template 'vicuna'"),
        (["pack", str(store), "--spec", "l3", "--capacity", "8"], "longer than capacity 8"),
        (["show", str(store), "0", "--render", "nope"], "no render spec 'nope' (specs: l3)"),
        (["pack", str(store), "--spec", "l3", "--capacity", "96", "--mixture", "nope"], "no mixture 'nope'"),
    ]:
        result = runner.invoke(cli, arguments)
        assert result.exit_code == 1 and message in result.output, (arguments, result.output)


def test_preference_entries_render_pad_and_are_never_packed(tmp_path: Path, make_store, tiny_tokenizer: Path) -> None:
    def side(answer: str) -> list[dict]:
        return [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": answer}]

    write_jsonl(tmp_path / "pairs.jsonl", [{"chosen": side("The answer is 42."), "rejected": side("no")}] * 4)
    store = make_store(f"pairs:\n  path: {tmp_path / 'pairs.jsonl'}\n  source: local\n  converter: pair\n")
    summary = render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096, jobs=1))
    assert summary.counts == [("pairs", "ok", 4)]
    with DataEngine(store, render="default") as engine:
        first = engine[0]
        assert set(first) == {"_dataset_name", "chosen", "rejected"}
        assert query(store, "SELECT tokens FROM entry_lengths LIMIT 1")[0][0] == \
            len(first["chosen"]["input_ids"]) + len(first["rejected"]["input_ids"])
        batch = Collator(pad_token_id=0)(engine[[0, 1]])
        assert batch["input_ids"].shape[0] == 4  # chosen, chosen, rejected, rejected
        assert batch["labels"][0].tolist() != batch["labels"][2].tolist()
        with pytest.raises(StoreError, match="preference data \\(pairs\\)"):
            pack_store(store, "default", capacity=4096)


def test_the_readme_render_example_runs_on_the_shipped_demo_tokenizer(demo_copy: Path) -> None:
    store = demo_copy
    runner = CliRunner()
    for arguments in (["render", str(store), "--tokenizer", str(REPO / "data" / "demo_tokenizer"), "--cutoff", "256"],
                      ["pack", str(store), "--spec", "default", "--capacity", "512", "--seed", "0"],
                      ["show", str(store), "0", "--render", "default"]):
        result = runner.invoke(cli, arguments)
        assert result.exit_code == 0, (arguments, result.output)
    statuses = dict(query(store, "SELECT status, count(*) FROM entry_lengths GROUP BY status"))
    assert set(statuses) <= {"ok", "too_long"} and statuses["ok"] > 0


def test_cu_seq_lens_address_samples_in_a_padded_batch_of_packs() -> None:
    def sample(ids: list[int]) -> dict:
        return {"input_ids": ids, "labels": ids, "loss_weights": [1.0] * len(ids)}

    packs = [[sample([10, 11]), sample([20, 21])], [sample([30, 31, 32]), sample([40, 41, 42, 43, 44])]]
    batch = Collator(pad_token_id=0)(packs)
    flat = batch["input_ids"].view(-1).tolist()
    bounds = batch["cu_seq_lens"].tolist()
    segments = [flat[a:b] for a, b in zip(bounds, bounds[1:])]
    assert segments == [[10, 11], [20, 21], [0, 0, 0, 0], [30, 31, 32], [40, 41, 42, 43, 44]]
    assert batch["max_length"] == 5
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 0, 0, 0, 0], [0, 1, 2, 0, 1, 2, 3, 4]]
    assert batch["labels"].tolist()[1] == [30, 31, 32, IGNORE, 41, 42, 43, 44]


def test_moved_bare_or_truncating_tokenizers_render_as_recorded(
        tmp_path: Path, store: Path, tiny_tokenizer: Path) -> None:
    import shutil

    from dataidx.errors import RenderError
    from dataidx.render import BUILTIN_TEMPLATES, Renderer, load_tokenizer

    # A moved tokenizer folder: rendering again with the same files updates where readers load it.
    moved = tmp_path / "moved-tokenizer"
    shutil.copytree(tiny_tokenizer, moved)
    render_store(RenderRequest(store, moved, cutoff=4096))
    shutil.rmtree(moved)
    shutil.copytree(tiny_tokenizer, tmp_path / "new-place")
    assert render_store(RenderRequest(store, tmp_path / "new-place", cutoff=4096)).reused
    assert engine_length(store, render="default") > 0
    # A bare tokenizer.json names no BOS/EOS: refused unless its tokenizer_config.json is beside it.
    (tmp_path / "bare").mkdir()
    shutil.copy(tiny_tokenizer / "tokenizer.json", tmp_path / "bare" / "tokenizer.json")
    with pytest.raises(RenderError, match="names no special tokens"):
        load_tokenizer(tmp_path / "bare" / "tokenizer.json")
    assert load_tokenizer(tiny_tokenizer / "tokenizer.json").eos_token == "</s>"
    # Truncation switched on in the caller's tokenizer does not leak into rendering or the fingerprint.
    tokenizer = load_tokenizer(tiny_tokenizer)
    tokenizer("hello world", truncation=True, max_length=3)
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=4096).render(
        {"messages": [{"role": "user", "content": [{"type": "text", "value": "hello world how are you"}]},
                      {"role": "assistant", "content": [{"type": "text", "value": "fine"}]}]}, has_cut=True)
    assert rendered.status == "ok" and rendered.tokens > 3
    DataEngine(store, render="default", tokenizer=tokenizer).close()  # the tokenizer passed is the one recorded
    # Left truncation to one token keeps one token.
    one = Renderer(train_tokenizer(add_bos=True), BUILTIN_TEMPLATES["plain"], cutoff=1, truncation="left").render(
        {"messages": [{"role": "user", "content": [{"type": "text", "value": "Well?"}]},
                      {"role": "assistant", "content": [{"type": "text", "value": "The answer is 42."}]}]},
        has_cut=True)
    # The one token left is the closing newline, which v1's rule supervises with the turn.
    assert one.tokens == 1 and one.status == "truncated" and one.labels == one.input_ids


def test_info_lists_render_specs_and_plans(store: Path, tiny_tokenizer: Path) -> None:
    from dataidx.store import store_info

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096, template="plain", name="plain-4k"))
    pack_store(store, "plain-4k", capacity=4096, seed=1, name="p")
    details = store_info(store)
    (spec,) = details["render_specs"]
    assert (spec["name"], spec["template"], spec["cutoff"], spec["kept"]) == ("plain-4k", "plain", 4096, 100)
    assert details["pack_plans"][0]["plan"] == "p" and details["pack_plans"][0]["seed"] == 1
    result = CliRunner().invoke(cli, ["info", str(store)])
    assert "render specs" in result.output and "plain-4k" in result.output and "packing plans" in result.output


def test_info_and_pack_state_samples_packs_and_steps_per_epoch(store: Path, tiny_tokenizer: Path) -> None:
    from dataidx.store import store_info

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=48, name="short"))  # some entries are too long
    details = store_info(store)
    (mixture,) = details["mixtures"]
    serves = engine_length(store, render="short")
    assert mixture["training_samples"] == {"short": serves} and serves < mixture["entries"] == engine_length(store)
    result = CliRunner().invoke(cli, ["info", str(store)])
    assert f"samples per epoch: {mixture['entries']} with DataEngine, {serves} with render='short'" in result.output
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "short", "--capacity", "48",
                                      "--global-batch-size", "4"])
    with PackedDataset(store) as packed:
        packs = len(packed)
    assert result.exit_code == 0 and packs % 4 and packs > 4
    last = "the last pack does" if packs % 4 == 1 else f"the last {packs % 4} packs do"
    assert f"{packs // 4} steps per epoch at a global batch size of 4 packs; {last} not fill a step" in result.output
    assert "packs per epoch" in CliRunner().invoke(cli, ["info", str(store)]).output


def test_build_can_render_as_it_goes(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["build", str(REPO / "data" / "demo_sft.yaml"), "-o", str(tmp_path / "d.db"),
                                      "--tokenizer", str(REPO / "data" / "demo_tokenizer"), "--cutoff", "256"])
    assert result.exit_code == 0, result.output
    assert "as spec 'default'" in result.stderr
    assert query(tmp_path / "d.db", "SELECT count(*) FROM entry_lengths")[0][0] == \
        query(tmp_path / "d.db", "SELECT count(*) FROM base_entries")[0][0]


@pytest.mark.slow
def test_rendered_datasets_work_in_spawned_workers(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=64, truncation="right"))
    pack_store(store, "default", capacity=128)
    collate = Collator(pad_token_id=0)
    with DataEngine(store, render="default") as engine:
        # One worker each: a spawned worker imports torch and dataidx afresh (seconds), and one shows
        # what spawning needs (the dataset pickled and reopened); tests/test_engine.py runs two.
        loader = torch.utils.data.DataLoader(engine, batch_size=16, num_workers=1, collate_fn=collate,
                                             multiprocessing_context="spawn")
        assert sum(int(b["input_ids"].shape[0]) for b in loader) == len(engine)
        with PackedDataset(store) as packs:
            loader = torch.utils.data.DataLoader(packs, batch_size=4, num_workers=1, collate_fn=collate,
                                                 multiprocessing_context="spawn")
            assert (sum(int(b["attention_mask"].sum()) for b in loader)
                    == query(store, "SELECT sum(tokens) FROM pack_members")[0][0])


@pytest.mark.slow
def test_remove_spec_and_plan(store: Path, tiny_tokenizer: Path) -> None:
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096))
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=4096, template="plain", name="other"))
    pack_store(store, "default", capacity=4096, name="a")
    pack_store(store, "default", capacity=4096, name="b")
    runner = CliRunner()
    result = runner.invoke(cli, ["remove-plan", str(store), "a"])
    assert result.exit_code == 0 and query(store, "SELECT plan FROM pack_plans") == [("b",)]
    result = runner.invoke(cli, ["remove-spec", str(store), "default"])
    assert result.exit_code == 0 and "and 1 packing plans" in result.stderr
    assert query(store, "SELECT DISTINCT spec FROM entry_lengths") == [("other",)]
    assert query(store, "SELECT count(*) FROM packs")[0][0] == 0
    for command, name, message in [("remove-plan", "a", "no packing plan 'a' (plans: none)"),
                                   ("remove-spec", "default", "no render spec 'default' (specs: other)")]:
        result = runner.invoke(cli, [command, str(store), name])
        assert result.exit_code == 1 and message in result.output


def test_a_generic_tokenizer_loads_as_autotokenizer_loads_it_without_importing_torch(tmp_path: Path) -> None:
    """The generic fast tokenizer is built directly (AutoTokenizer's model config imports torch,
    3 s of every fresh render); a folder with a model config.json is left to AutoTokenizer."""
    import shutil
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from dataidx.render import load_tokenizer

    demo = REPO / "data" / "demo_tokenizer"
    text = "<s>Hello, wörld!\n  tabs\tand 12345 </s>"
    ours, theirs = load_tokenizer(demo), AutoTokenizer.from_pretrained(str(demo), local_files_only=True)
    assert type(ours) is type(theirs) and ours(text).input_ids == theirs(text).input_ids
    assert ours.special_tokens_map == theirs.special_tokens_map
    probe = ("import sys; from dataidx.render import load_tokenizer; load_tokenizer(sys.argv[1]); "
             "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", probe, str(demo)], check=True, capture_output=True,
                          text=True).stdout.strip() == "False"
    # A model config may choose another class: AutoTokenizer decides, as it always did.
    modelled = tmp_path / "modelled"
    shutil.copytree(demo, modelled)
    (modelled / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert type(load_tokenizer(modelled)) is type(AutoTokenizer.from_pretrained(str(modelled), local_files_only=True))


def test_a_specs_lengths_and_row_starts_read_in_chunks_equal_the_stored_rows(
        store: Path, tiny_tokenizer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataidx.store import Datasets, open_store
    from dataidx.store.specs import lengths as positions
    from dataidx.store.specs.lengths import spec_lengths

    # some entries too long: trains differs
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=30, truncation="drop"))
    stored = query(store, "SELECT r.entry_id, r.tokens, r.status IN ('ok', 'truncated'), b.row FROM entry_renders "
                          "AS r JOIN base_entries AS b ON b.id = r.entry_id ORDER BY r.entry_id")
    monkeypatch.setattr(positions, "_ENTRIES_PER_LENGTHS_QUERY", 7)  # chunks of 7 entries, the last one short
    with open_store(store) as handle:
        spec_id = handle.value("SELECT id FROM render_specs WHERE name = 'default'")
        lengths = spec_lengths(handle, spec_id)
        first, starts = Datasets(handle).row_starts()
    assert lengths.first == first == stored[0][0] and len(stored) % 7
    assert lengths.tokens.tolist() == [tokens for _, tokens, _, _ in stored]
    assert lengths.trains.tolist() == [bool(trains) for _, _, trains, _ in stored]
    assert not lengths.trains.all() and lengths.trains.any()
    assert starts.tolist() == [at == 0 or row != stored[at - 1][3] for at, (*_, row) in enumerate(stored)]


def test_an_integer_list_numpy_cannot_read_is_a_damaged_store() -> None:
    from dataidx.store.specs import lengths as positions

    class Answers:  # a handle whose one read answers ``text``
        def __init__(self, text: str | None) -> None:
            self.text = text

        def value(self, template: str, *parameters: object) -> str | None:
            return self.text

    for text in ("12,x,3", "1,2,", "1,,2"):  # NumPy stops short at each (or refuses): never a short array
        with pytest.raises(StoreError, match="not an integer where one is; the store is damaged"):
            positions._integers(Answers(text), "SELECT ...")  # type: ignore[arg-type]
    assert positions._integers(Answers(None), "SELECT ...").tolist() == []  # type: ignore[arg-type]
    assert positions._integers(Answers("0,-3,9"), "SELECT ...").tolist() == [0, -3, 9]  # type: ignore[arg-type]


def test_a_chunk_read_in_any_order_is_put_in_entry_order_and_a_missing_entry_is_refused() -> None:
    """A chunk's integers carry each entry's offset in their low bits: the values land at their
    offsets whatever order the database returned them in (SQL promises none for an aggregate), and
    an entry missing, twice or out of the chunk is a damaged store."""
    from dataidx.store.specs import lengths as positions

    def read(*pairs: tuple[int, int]) -> np.ndarray:
        return np.array([value << positions._OFFSET_BITS | offset for value, offset in pairs], dtype=np.int64)

    def ordered(values: np.ndarray, count: int) -> list[int]:
        return positions._in_entry_order(values, count, refused="refused", gaps="gaps").tolist()

    assert ordered(read((30, 2), (10, 0), (20, 1)), 3) == [10, 20, 30]
    assert ordered(read(), 0) == []
    for values, count in ((read((10, 0), (20, 0), (30, 2)), 3), (read((10, 0), (20, 1)), 3),
                          (read((10, 0), (20, 3), (30, 1)), 3), (read((10, 0), (20, 1), (30, 2)), 2)):
        with pytest.raises(StoreError, match="gaps"):
            ordered(values, count)
    with pytest.raises(StoreError, match="refused"):
        ordered(np.array([10 << positions._OFFSET_BITS, -1]), 2)


@pytest.mark.parametrize("which", ["min(id)", "max(id)", "min(id) + 3"])
def test_a_spec_missing_an_entry_is_a_damaged_store(store: Path, tiny_tokenizer: Path, which: str) -> None:
    """The first, the last or a middle entry's row gone: never another entry's length in its place
    (the rows' reader: a spec without length_chunks, and verify's comparison)."""
    from dataidx.store import open_store
    from dataidx.store.specs.lengths import rendered_lengths as spec_lengths

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=30, truncation="drop"))
    with sqlite3.connect(store) as connection:
        connection.execute(f"DELETE FROM entry_renders WHERE entry_id = (SELECT {which} FROM base_entries)")
    with open_store(store) as handle, pytest.raises(StoreError, match="does not cover every base entry"):
        spec_lengths(handle, handle.value("SELECT id FROM render_specs WHERE name = 'default'"))


@pytest.mark.parametrize("change", ["UPDATE entry_renders SET tokens = 4294967303 WHERE entry_id = {second}",
                                    "UPDATE entry_renders SET tokens = -1 WHERE entry_id = {second}",
                                    "UPDATE entry_renders SET tokens = '12x' WHERE entry_id = {second}",
                                    "UPDATE base_entries SET row = 4294967296 WHERE id = {second}",
                                    "UPDATE base_entries SET row = -2 WHERE id = {second}"])
def test_a_crafted_length_or_row_is_a_damaged_store_not_another_number(
        store: Path, tiny_tokenizer: Path, change: str) -> None:
    """A length past 31 bits would spill into the entry's bits of the packed integer, and text
    would be read as the number it starts with: each is refused in one line."""
    from dataidx.store import Datasets, open_store
    from dataidx.store.specs.lengths import rendered_lengths as spec_lengths

    render_store(RenderRequest(store, tiny_tokenizer, cutoff=30, truncation="drop"))
    with sqlite3.connect(store) as connection:
        second = connection.execute("SELECT min(id) + 1 FROM base_entries").fetchone()[0]
        connection.execute(change.format(second=second))
    with open_store(store) as handle, pytest.raises(StoreError, match="the store is damaged") as raised:
        spec_lengths(handle, handle.value("SELECT id FROM render_specs WHERE name = 'default'"))
        Datasets(handle).row_starts()
    said = "tokens that no render writes" if "entry_renders" in change else "a row no build writes"
    assert said in str(raised.value)


def _lengths(store: Path, column: str = "tokens") -> tuple[SpecLengths, SpecLengths]:
    """``(spec_lengths, rendered_lengths)`` of spec 'default': from its length_chunks and from its rows."""
    from dataidx.store import open_store
    from dataidx.store.specs.lengths import rendered_lengths, spec_lengths

    with open_store(store) as handle:
        spec_id = handle.value("SELECT id FROM render_specs WHERE name = 'default'")
        return spec_lengths(handle, spec_id, column), rendered_lengths(handle, spec_id, column)


@pytest.mark.parametrize("per_chunk", [3, 1 << 20])
def test_length_chunks_hold_what_the_rows_hold(store: Path, tiny_tokenizer: Path, per_chunk: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Packing and token budgets read a spec's lengths from its length_chunks: the same arrays as
    its entry_renders, chunks of 3 entries or one; a spec whose chunks are gone reads its rows."""
    monkeypatch.setattr("dataidx.store.specs.writes.LENGTH_CHUNK_ENTRIES", per_chunk)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=30, truncation="drop"))
    with sqlite3.connect(store) as connection:
        entries = connection.execute("SELECT count(*) FROM base_entries").fetchone()[0]
        chunks = connection.execute("SELECT count(*), sum(entries) FROM length_chunks").fetchone()
    connection.close()
    assert chunks == (-(-entries // per_chunk), entries)
    for column in ("tokens", "supervised_tokens"):
        chunked, rendered = _lengths(store, column)
        assert chunked.first == rendered.first and chunked.tokens.dtype == np.int32
        assert np.array_equal(chunked.tokens, rendered.tokens) and np.array_equal(chunked.trains, rendered.trains)
    assert not _lengths(store)[0].trains.all() and _lengths(store)[0].trains.any()
    with sqlite3.connect(store) as connection:
        connection.execute("DELETE FROM length_chunks")
    connection.close()
    chunked, rendered = _lengths(store)
    assert np.array_equal(chunked.tokens, rendered.tokens)


@pytest.mark.parametrize("change", [
    "UPDATE length_chunks SET entries = entries - 1 WHERE first_entry = (SELECT max(first_entry) FROM length_chunks)",
    "UPDATE length_chunks SET entries = 1000000000000 WHERE first_entry = (SELECT min(first_entry) FROM length_chunks)",
    "DELETE FROM length_chunks WHERE first_entry = (SELECT min(first_entry) + 3 FROM length_chunks)",
    "DELETE FROM length_chunks WHERE first_entry = (SELECT max(first_entry) FROM length_chunks)",
    "UPDATE length_chunks SET tokens = substr(tokens, 1, 5) WHERE first_entry = (SELECT min(first_entry) FROM "
    "length_chunks)",
    "UPDATE length_chunks SET tokens = 'abcdefghijkl'",
    "UPDATE length_chunks SET first_entry = first_entry + 100000",
    "INSERT INTO length_chunks SELECT spec_id, first_entry + 1000, entries, tokens, supervised_tokens FROM "
    "length_chunks WHERE first_entry = (SELECT max(first_entry) FROM length_chunks)",
])
def test_crafted_length_chunks_are_a_damaged_store_in_one_line(store: Path, tiny_tokenizer: Path, change: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk short, claiming a trillion entries, missing, cut, text, moved or one too many: one
    line from pack, before anything is allocated by what a row claims; the store as it was."""
    monkeypatch.setattr("dataidx.store.specs.writes.LENGTH_CHUNK_ENTRIES", 3)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=30, truncation="drop"))
    with sqlite3.connect(store) as connection:
        assert connection.execute(change).rowcount > 0
    connection.close()
    before = store.read_bytes()
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "default", "--capacity", "64"])
    assert result.exit_code != 0
    assert "length_chunks do not hold tokens for every base entry, 4 bytes each; the store is damaged" in result.output
    assert len(result.output.strip().splitlines()) == 1 and store.read_bytes() == before

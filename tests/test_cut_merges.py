"""``dataidx pack --merge-cuts``: a conversation's cuts trained as one sequence (or a prefix tree),
checked token by token against the cut entries v1 trains, and with a real model's loss and gradients.

The data is LLaMA-Factory's glaive tool-call demo (multi-turn, with tool calls), a dataset with
unusual loss weights on two turns, and a small dataset drawn with ``size:`` so that some rows
repeat a cut or miss one. Templates: Qwen2.5's (every cut a prefix of the next) and Qwen3's (it
drops the reasoning block of past turns, so cuts branch off each other).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx import Collator, PackedDataset
from dataidx.cli import cli
from dataidx.errors import StaleStoreError, StoreError, UsageError
from dataidx.pack.merging import OUTCOMES, TokenWords, common_prefixes, merge_epoch
from dataidx.pack.sequences import merged_sample
from dataidx.render import IGNORE
from dataidx.render.served import RenderedMixture
from dataidx.store import run_query
from dataidx.training.masks import block_causal_mask

from .conformance import build_tokenizer
from .helpers import REPO, SHARED_DATA, chat_rows, write_jsonl, write_yaml

pytestmark = pytest.mark.slow  # real templates rendered over the glaive demo, and a model's forward passes


def _message(role: str, text: str, weight: float | None = None) -> dict:
    message: dict = {"role": role, "content": [{"type": "text", "value": text}]}
    if weight is not None:
        message["loss_weight"] = weight
    return message


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """glaive + weighted (two weighted turns a row) + drawn (some cuts repeated) + partial (some missing), rendered
    with stored tokens under qwen2_5 and qwen3, packed with and without merging."""
    folder = tmp_path_factory.mktemp("merges")
    weighted = write_jsonl(folder / "weighted.jsonl", [
        {"messages": [_message("user", f"Question {i}?", 0.0), _message("assistant", f"Answer {i}.", 0.5),
                      _message("user", "And then?", 0.0), _message("assistant", "Then 0.1.", 0.1)]}
        for i in range(12)])
    drawn = write_jsonl(folder / "drawn.jsonl", chat_rows([3, 2, 4, 1, 3, 2]))
    partial = write_jsonl(folder / "partial.jsonl", chat_rows([2, 3, 2, 3]))
    config = write_yaml(folder / "config.yaml", f"""
glaive:
  path: {SHARED_DATA / "glaive_toolcall_en_demo.json"}
  source: local
  converter: sharegpt
weighted:
  path: {weighted}
  source: local
  converter: none
drawn:
  path: {drawn}
  source: local
  converter: sharegpt
  size: 20
partial:
  path: {partial}
  source: local
  converter: sharegpt
  size: 5
""")
    path = folder / "merges.db"
    assert _run("build", config, "-o", path).exit_code == 0
    for slug in ("qwen2_5", "qwen3"):
        tokenizer = build_tokenizer(slug, folder / slug)
        result = _run("render", path, "--tokenizer", tokenizer, "--cutoff", 4096, "--name", slug, "--store-tokens")
        assert result.exit_code == 0, result.output
    return path


def _run(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture(scope="module")
def plans(store: Path) -> dict[str, str]:
    """Plan name -> the pack command's output: merged chains (qwen2_5), trees (qwen3), and unmerged."""
    said = {}
    for name, spec, flags in (("chains", "qwen2_5", ["--merge-cuts"]), ("trees", "qwen3", ["--merge-cuts", "--trees"]),
                              ("qwen3_chains", "qwen3", ["--merge-cuts"]), ("plain", "qwen2_5", [])):
        result = _run("pack", store, "--spec", spec, "--capacity", 8192, "--name", name, "--global-batch-size", 4,
                      *flags)
        assert result.exit_code == 0, result.output
        said[name] = result.output
    return said


def _merges(store: Path, plan: str) -> dict[str, tuple[int, int, int, int]]:
    rows = run_query(store, "SELECT outcome, rows, entries, cut_tokens, tokens FROM cut_merges WHERE plan = :plan",
                     {"plan": plan})[1]
    return {outcome: (rows, entries, cut_tokens, tokens) for outcome, rows, entries, cut_tokens, tokens in rows}


def test_prefix_stable_conversations_train_as_one_sequence(store: Path, plans: dict[str, str]) -> None:
    merges = _merges(store, "chains")
    # glaive: 261 of its 300 rows have several cuts, one of them a cut past the cutoff; weighted: 12 rows
    assert set(merges) <= set(OUTCOMES) and "not a prefix" not in merges and "tree" not in merges
    merged_rows, _, cut_tokens, tokens = merges["merged"]
    assert merged_rows >= 272 and cut_tokens / tokens >= 2.0
    assert merges["a cut does not train"][0] == 1
    assert merges["cuts drawn unequally often"][0] >= 1 and merges["without its siblings"][0] >= 1
    said = plans["chains"]
    assert "merged cuts: " in said and "as one sequence" in said and "without --merge-cuts: " in said
    plain = run_query(store, "SELECT packs, tokens, entries FROM pack_plans WHERE plan IN ('plain', 'chains') "
                             "ORDER BY plan DESC")[1]
    assert plain[0][2] == plain[1][2]  # the same positions train
    assert plain[0][1] / plain[1][1] >= 1.8 and plain[1][0] < plain[0][0]  # plain first: tokens, packs


def test_history_stripping_templates_train_as_trees(store: Path, plans: dict[str, str]) -> None:
    chains = _merges(store, "qwen3_chains")
    assert "merged" not in chains or chains["merged"][0] < chains["not a prefix"][0]
    trees = _merges(store, "trees")
    rows, _, cut_tokens, tokens = trees["tree"]
    assert rows >= 200 and cut_tokens / tokens >= 1.3
    assert "as prefix trees" in plans["trees"]


def _chain_hashes(ids: list[int], previous: list[int]) -> list[bytes]:
    """For each token, a digest of the ids on its path up to it (``previous[t]``: the token before
    it on its path, -1 at a root): equal digests mean equal contexts."""
    digests: list[bytes] = []
    for token, before in zip(ids, previous):
        head = digests[before] if before >= 0 else b""
        digests.append(hashlib.blake2b(head + token.to_bytes(4, "little"), digest_size=16).digest())
    return digests


def _path_predecessors(sample: dict[str, Any]) -> list[int]:
    """The token before each token on its path: the one before it in its segment, else the last
    token of its parent segment."""
    count = len(sample["input_ids"])
    segments = sample.get("segments") or [[0, count, -1]]
    before = list(range(-1, count - 1))
    for first, _, parent in segments:
        before[first] = -1 if parent < 0 else segments[parent][0] + segments[parent][1] - 1
    return before


def _trained(sample: dict[str, Any]) -> Counter:
    """(context digest, target) -> summed weight of a sample's labelled tokens: each label trains the
    prediction made after the token before it on its path."""
    before = _path_predecessors(sample)
    digests = _chain_hashes(sample["input_ids"], before)
    found: Counter = Counter()
    for t, (label, weight) in enumerate(zip(sample["labels"], sample["loss_weights"])):
        if label != IGNORE and before[t] >= 0:
            found[digests[before[t]], label] += weight
    return found


@pytest.mark.parametrize("plan, spec", [("chains", "qwen2_5"), ("trees", "qwen3")])
def test_every_supervised_token_trains_as_in_its_cut_entry(store: Path, plans: dict[str, str], plan: str,
                                                          spec: str) -> None:
    _check_every_token(store, plan, spec)


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scripts/bench.py's multi-turn conversations (1 to 6 exchanges), rendered and packed as the
    benchmark does: plain, chains under Qwen2.5, trees under Qwen3."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench import generate

    folder = tmp_path_factory.mktemp("bench_merges")
    generate(folder, 0, 400)
    config = write_yaml(folder / "chats.yaml", f"chats:\n  path: {folder / 'sharegpt.jsonl'}\n  source: local\n"
                                               "  converter: sharegpt\n")
    path = folder / "chats.db"
    assert _run("build", config, "-o", path).exit_code == 0
    for slug, flags in (("qwen2_5", ["--merge-cuts"]), ("qwen3", ["--merge-cuts", "--trees"])):
        result = _run("render", path, "--tokenizer", build_tokenizer(slug, folder / slug), "--cutoff", 4096, "--name",
                      slug, "--store-tokens")
        assert result.exit_code == 0, result.output
        for name, extra in ((f"{slug}_plain", []), (f"{slug}_merged", flags)):
            assert _run("pack", path, "--spec", slug, "--capacity", 8192, "--name", name, *extra).exit_code == 0
    return path


@pytest.mark.parametrize("spec, least", [("qwen2_5", 2.0), ("qwen3", 1.3)])
def test_the_bench_conversations_forward_far_fewer_tokens_with_every_label_kept(bench_store: Path, spec: str,
                                                                                least: float) -> None:
    (plain, merged), = run_query(bench_store, "SELECT p.tokens, m.tokens FROM pack_plans AS p, pack_plans AS m "
                                              "WHERE p.plan = :plain AND m.plan = :merged",
                                 {"plain": f"{spec}_plain", "merged": f"{spec}_merged"})[1]
    assert plain / merged >= least
    _check_every_token(bench_store, f"{spec}_merged", spec)


def _check_every_token(store: Path, plan: str, spec: str) -> None:
    """Every (context, target) each training entry of the mixture trains, with its weight, is what
    the plan's samples train: nothing lost, nothing added, nothing in another context."""
    expected: Counter = Counter()
    with RenderedMixture(store, spec=spec) as entries:
        for sample in entries.get_many(list(range(len(entries)))):
            expected.update(_trained(sample))
    found: Counter = Counter()
    merged = 0
    with PackedDataset(store, plan) as packs:
        for index in range(len(packs)):
            merged += len(packs.packs.member_entries(index)) - len(packs[index])  # cuts that joined another
            for sample in packs[index]:
                if "position_ids" in sample:  # a branch continues its parent's positions
                    before = _path_predecessors(sample)
                    depth = [0] * len(before)
                    for t, b in enumerate(before):
                        depth[t] = 0 if b < 0 else depth[b] + 1
                    assert sample["position_ids"] == depth
                found.update(_trained(sample))
    assert merged
    assert found.keys() == expected.keys()
    assert all(abs(found[key] - expected[key]) < 1e-9 for key in expected)


def test_the_tree_mask_lets_a_token_see_exactly_its_path(store: Path, plans: dict[str, str]) -> None:
    with PackedDataset(store, "trees") as packs:
        batch = Collator(pad_token_id=0)([packs[0], packs[1]])
        samples = [packs[0], packs[1]]
    assert "cu_seq_lens" not in batch and batch["attention_mask"].shape[1] == 1
    for row, pack in enumerate(samples):
        offset = 0
        mask = batch["attention_mask"][row, 0]
        for sample in pack:
            before = _path_predecessors(sample)
            for q in range(0, len(before), 7):
                path, at = set(), q
                while at >= 0:
                    path.add(offset + at)
                    at = before[at]
                assert set(torch.nonzero(mask[offset + q]).flatten().tolist()) == path
            offset += len(before)
        assert not mask[offset:, :offset].any()  # padding sees no token


def _model(vocabulary: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    # One layer of two query heads sharing a key/value head: a mask that leaks shows in the first
    # layer already, and attention over a full 8k pack in float64 costs its square per head.
    config = LlamaConfig(vocab_size=vocabulary, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192)
    model = LlamaForCausalLM(config).double()
    model.config._attn_implementation = "sdpa"
    return model


def _loss(model: Any, batch: dict[str, Any], mask: Any) -> torch.Tensor:
    """The sum of per-token weighted cross-entropy losses of a batch (labels shifted as transformers does)."""
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], attention_mask=mask).logits
    labels, weights = batch["labels"][:, 1:], batch["loss_weights"][:, 1:]
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                               ignore_index=IGNORE, reduction="none")
    return (losses * weights.reshape(-1).to(losses.dtype)).sum()


def _gradients(model: Any, loss: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return [parameter.grad.clone() for parameter in model.parameters() if parameter.grad is not None]


@pytest.mark.parametrize("plan, spec", [("chains", "qwen2_5"), ("trees", "qwen3")])
def test_a_merged_pack_has_its_cuts_loss_and_gradients(store: Path, plans: dict[str, str], plan: str,
                                                      spec: str) -> None:
    collate = Collator(pad_token_id=0)
    with PackedDataset(store, plan) as packs:
        # the shortest such pack with merged cuts: a full one is 8k tokens, and attention's cost grows
        # with its square
        index = min((i for i in range(len(packs)) if sum(s["labels"].count(IGNORE) < len(s["labels"])
                                                         for s in packs[i]) >= 2 and len(packs[i]) <= 6
                     and len(packs.packs.member_entries(i)) > len(packs[i])),
                    key=lambda i: sum(len(s["input_ids"]) for s in packs[i]))
        pack = packs[index]
        entries = packs.packs.member_entries(index)
        cuts = packs.packs.server.get(entries, packs.packs.reader.fetch)
    model = _model(1 + max(max(s["input_ids"]) for s in cuts))
    batch = collate([pack])
    mask = batch["attention_mask"] if plan == "trees" else block_causal_mask(batch["sample_ids"])
    merged = _loss(model, batch, mask)
    merged_gradients = _gradients(model, merged)
    separate = sum(_loss(model, collate.padded([cut]), None) for cut in cuts)
    separate_gradients = _gradients(model, separate)
    assert abs(float(merged.detach()) - float(separate.detach())) <= 1e-9 * abs(float(separate.detach()))
    assert len(cuts) > len(pack)  # cuts were merged
    for a, b in zip(merged_gradients, separate_gradients, strict=True):  # float64: equal up to rounding
        torch.testing.assert_close(a, b, rtol=0, atol=1e-8 * float(b.abs().max()))


def test_flex_attention_reads_the_tree_block_mask(store: Path, plans: dict[str, str]) -> None:
    from dataidx import tree_block_mask

    with PackedDataset(store, "trees") as packs:
        pack = next(packs[i] for i in range(len(packs)) if any("segments" in s for s in packs[i]))
    # The shortest tree of the pack: the mask is what is tested, and the cost grows with its length.
    tree = min((s for s in pack if "segments" in s), key=lambda s: len(s["input_ids"]))
    batch = Collator(pad_token_id=0)([[tree]])
    model = _model(1 + max(tree["input_ids"])).float()
    with torch.no_grad():
        dense = _loss(model, batch, batch["attention_mask"])
        model.config._attn_implementation = "flex_attention"
        flex = _loss(model, batch, tree_block_mask(batch))
    assert abs(float(dense) - float(flex)) <= 1e-4 * abs(float(dense))


def test_a_transformers_trainer_trains_a_tree_plan_with_v1s_loss(store: Path, plans: dict[str, str],
                                                                tmp_path: Path) -> None:
    """The recipe of docs/cut-merges.md: PackedDataset, Collator, and dataidx.WeightedLoss, which
    gives the model what its forward takes and normalises as v1 does. Its first logged loss is
    the one computed by hand from the same batch."""
    from transformers import Trainer, TrainingArguments

    from dataidx import WeightedLoss

    class V1Loss(WeightedLoss, Trainer):
        pass

    collate = Collator(pad_token_id=0)
    with PackedDataset(store, "trees") as packs:
        model = _model(1 + max(i for k in (0, 1) for s in packs[k] for i in s["input_ids"])).float()
        batch = collate([packs[0]])
        with torch.no_grad():
            weights = batch["loss_weights"][:, 1:]
            by_hand = float(_loss(model, batch, batch["attention_mask"]) / (weights.sum() + 1e-6))
        arguments = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=1,
                                      report_to=[], use_cpu=True, save_strategy="no", logging_steps=1,
                                      dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False,
                                      learning_rate=1e-3)

        class InOrder(V1Loss):
            def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Any:
                return torch.utils.data.SequentialSampler(packs)

        trainer = InOrder(model=model, args=arguments, train_dataset=packs, data_collator=collate)
        trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and abs(losses[0] - by_hand) <= 1e-3 * by_hand


def test_eager_attention_reads_the_additive_tree_mask(store: Path, plans: dict[str, str]) -> None:
    """Eager attention adds a 4-D mask to its scores: the boolean one would mask nothing there."""
    with PackedDataset(store, "trees") as packs:
        pack = next(packs[i] for i in range(len(packs)) if any("segments" in s for s in packs[i]))
    # The shortest tree of the pack: the mask is what is tested, and the cost grows with its length.
    tree = min((s for s in pack if "segments" in s), key=lambda s: len(s["input_ids"]))
    model = _model(1 + max(tree["input_ids"]))
    boolean = Collator(pad_token_id=0)([[tree]])
    additive = Collator(pad_token_id=0, tree_mask_dtype=torch.float64)([[tree]])
    assert additive["attention_mask"].dtype == torch.float64
    assert torch.equal(additive["attention_mask"] == 0, boolean["attention_mask"])
    with torch.no_grad():
        sdpa = _loss(model, boolean, boolean["attention_mask"])
        model.config._attn_implementation = "eager"
        eager = _loss(model, additive, additive["attention_mask"])
        wrong = _loss(model, boolean, boolean["attention_mask"])
    assert abs(float(eager) - float(sdpa)) <= 1e-9 * abs(float(sdpa)) and abs(float(wrong) - float(sdpa)) > 1e-6
    with pytest.raises(UsageError, match="tree_mask_dtype must be a floating dtype"):
        Collator(pad_token_id=0, tree_mask_dtype=torch.int64)
    # the same for a chain plan's packs, through block_causal_mask (its shortest pack of several members)
    with PackedDataset(store, "chains") as packs:
        batch = Collator(pad_token_id=0)([min((packs[i] for i in range(len(packs)) if len(packs[i]) > 1),
                                              key=lambda pack: sum(len(s["input_ids"]) for s in pack))])
    model = _model(1 + int(batch["input_ids"].max()))
    with torch.no_grad():
        sdpa = _loss(model, batch, block_causal_mask(batch["sample_ids"]))
        model.config._attn_implementation = "eager"
        eager = _loss(model, batch, block_causal_mask(batch["sample_ids"], torch.float64))
    assert abs(float(eager) - float(sdpa)) <= 1e-9 * abs(float(sdpa))


def test_merging_is_refused_in_one_line_where_it_cannot_check(store: Path, plans: dict[str, str],
                                                             tmp_path: Path) -> None:
    result = _run("pack", store, "--spec", "qwen3", "--capacity", 4096, "--trees")
    assert result.exit_code == 2 and "give --merge-cuts with it" in result.output
    unstored = tmp_path / "unstored.db"
    unstored.write_bytes(store.read_bytes())
    assert _run("render", unstored, "--tokenizer", store.parent / "qwen2_5", "--cutoff", 4096, "--name",
                "bare").exit_code == 0
    result = _run("pack", unstored, "--spec", "bare", "--capacity", 4096, "--merge-cuts")
    assert result.exit_code == 1 and "render spec 'bare' has no stored tokens" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = _run("export", store, "--plan", "chains", "--format", "megatron", "-o", tmp_path / "out")
    assert result.exit_code != 0 and "merges cuts (chains)" in result.output


def test_a_store_crafted_to_end_a_pack_inside_a_conversation_is_refused(store: Path, plans: dict[str, str],
                                                                         tmp_path: Path) -> None:
    import sqlite3

    crafted = tmp_path / "crafted.db"
    crafted.write_bytes(store.read_bytes())
    (crafted.parent / "crafted.db.tokens").symlink_to(store.parent / "merges.db.tokens")
    with sqlite3.connect(crafted) as connection:
        connection.execute("UPDATE packed_entries SET joined = 1 WHERE id = (SELECT k.first_member + k.members - 1 "
                           "FROM packs AS k JOIN packing_plans AS p ON p.id = k.plan_id "
                           "WHERE p.name = 'chains' AND k.pack = 0)")
        connection.execute("UPDATE packing_plans SET merge_cuts = 'spirals' WHERE name = 'trees'")
    with PackedDataset(crafted, "chains", verify=False) as packs, pytest.raises(
            StaleStoreError, match="a pack ends inside a merged conversation"):
        packs[0]
    with pytest.raises(StoreError, match="merges cuts as 'spirals', which this dataidx does not know"):
        PackedDataset(crafted, "trees", verify=False)


def test_info_and_compose_say_what_was_merged(store: Path, plans: dict[str, str]) -> None:
    info = _run("info", store).output
    assert "plan 'trees' merges cuts (trees): " in info and "as prefix trees" in info
    assert "plan 'plain' merges cuts" not in info
    details = json.loads(_run("info", store, "--json").output)
    plan = next(p for p in details["pack_plans"] if p["plan"] == "chains")
    assert plan["merge_cuts"] == "chains" and plan["merges"][0]["outcome"] == "merged"
    compose = _run("compose", store, "--spec", "qwen2_5").output
    assert "plan 'chains' merges cuts (chains): " in compose and "plan 'trees'" not in compose


def test_the_report_shows_what_was_merged_in_a_browser(store: Path, plans: dict[str, str], tmp_path: Path,
                                                       browser) -> None:
    from dataidx.view import write_report

    write_report(store, tmp_path / "trees.html", spec="qwen3", plan="trees", samples=1)
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.goto((tmp_path / "trees.html").as_uri())
    said = page.inner_text("#cut-merges")
    merges = _merges(store, "trees")
    before = sum(m[2] for m in merges.values())
    after = sum(m[3] for m in merges.values())
    assert f"forward {after:,} tokens instead of {before:,}" in said
    rows = page.locator("#packing table").last.locator("tr").all_inner_texts()
    assert any(row.startswith("tree") and f"{merges['tree'][0]}" in row for row in rows)
    assert page.locator("#cut-merges").is_visible()


# The planner alone, against a plain Python reference, on made-up token words.

@st.composite
def _epochs(draw: Any) -> tuple[list[list[list[int]]], list[int]]:
    rows = draw(st.lists(st.integers(1, 4), min_size=1, max_size=12))
    conversations = []
    for cuts in rows:
        ids: list[list[int]] = []
        for _ in range(cuts):
            shared = draw(st.integers(0, len(ids[-1]))) if ids else 0
            tail = draw(st.lists(st.integers(1, 9), min_size=1, max_size=5))
            ids.append((ids[-1][:shared] if ids else []) + tail)
        conversations.append(ids)
    entries = sum(rows, 0)
    drawn = draw(st.lists(st.integers(0, entries - 1), min_size=1, max_size=2 * entries))
    return conversations, drawn


@settings(max_examples=150, deadline=None)
@given(_epochs(), st.sampled_from(["chains", "trees"]), st.integers(4, 30))
def test_merge_epoch_matches_a_plain_reference(epoch: tuple[list[list[list[int]]], list[int]], mode: str,
                                               capacity: int) -> None:
    conversations, drawn = epoch
    cuts = [cut for conversation in conversations for cut in conversation]
    starts = np.array([k == 0 for conversation in conversations for k in range(len(conversation))])
    tokens = np.array([len(cut) for cut in cuts], dtype=np.int32)
    trains = tokens <= capacity
    words = np.array([token for cut in cuts for token in cut], dtype=np.uint16)
    index = np.concatenate([[0], np.cumsum(tokens)]).astype(np.uint64)
    entries = np.array(drawn, dtype=np.int64) + 5
    items = merge_epoch(entries, tokens, trains, starts, 5, TokenWords(words, index, 5, 0x7FFF), mode=mode,
                        capacity=capacity)
    # the reference: a row merges when all its cuts are drawn equally often, train, and chain (or
    # tree) within capacity; copy i is the i-th position of each cut
    counts = Counter(drawn)
    first = 0
    merged_rows = []
    for conversation in conversations:
        span = range(first, first + len(conversation))
        first += len(conversation)
        copies = counts[span[0]]
        if (len(conversation) < 2 or not copies or any(counts[e] != copies for e in span)
                or not all(trains[e] for e in span)):
            continue
        shared = [_common(a, b) for a, b in zip(conversation, conversation[1:])]
        chain = all(s == len(a) for s, a in zip(shared, conversation))
        if not chain and (mode == "chains" or 0 in shared):
            continue
        length = len(conversation[0]) + sum(len(b) - (s if s == len(a) else s - 1)
                                            for s, a, b in zip(shared, conversation, conversation[1:]))
        if length <= capacity:
            at = {e: [p for p, d in enumerate(drawn) if d == e] for e in span}
            merged_rows += [([at[e][copy] for e in span], length) for copy in range(copies)]
    found = [(items.members[a:a + n].tolist(), int(length)) for a, n, length in
             zip(np.cumsum(items.sizes) - items.sizes, items.sizes, items.lengths) if n > 1]
    assert sorted(found) == sorted(merged_rows)
    singles = sorted(items.members[np.cumsum(items.sizes)[items.sizes == 1] - 1].tolist())
    in_merged = {p for members, _ in merged_rows for p in members}
    assert len(in_merged) == sum(len(members) for members, _ in merged_rows)
    assert singles == [p for p, e in enumerate(drawn) if trains[e] and p not in in_merged]
    # and the samples built from the cuts forward exactly the planned tokens
    for members, length in merged_rows[:5]:
        sample = merged_sample([{"input_ids": cuts[drawn[p]], "labels": cuts[drawn[p]],
                                 "loss_weights": [1.0] * len(cuts[drawn[p]])} for p in members], trees=mode == "trees")
        assert len(sample["input_ids"]) == length


@st.composite
def _conversations(draw: Any) -> list[dict[str, Any]]:
    """2 to 6 cuts, each sharing a prefix of the one before (from one token up, or all of it)
    and adding its own tokens; some tokens supervised, with weights."""
    cuts: list[dict[str, Any]] = []
    ids = draw(st.lists(st.integers(1, 6), min_size=1, max_size=6))
    for number in range(draw(st.integers(2, 6))):
        if number:
            before = cuts[-1]["input_ids"]
            ids = before[:draw(st.integers(1, len(before)))] + draw(st.lists(st.integers(1, 6), max_size=5))
        trained = [draw(st.booleans()) and k > 0 for k in range(len(ids))]
        weights = [draw(st.sampled_from([1.0, 0.5, 0.25])) if t else 0.0 for t in trained]
        cuts.append({"input_ids": ids, "labels": [i if t else IGNORE for i, t in zip(ids, trained)],
                     "loss_weights": weights})
    return cuts


@settings(max_examples=300, deadline=None)
@given(_conversations())
def test_a_tree_trains_every_cut_token_in_its_own_context(cuts: list[dict[str, Any]]) -> None:
    """Branches at any point (after one shared token too), strict prefixes, repeats: the (context,
    target) -> weight each cut trains is what the merged sample trains."""
    expected: Counter = Counter()
    for cut in cuts:
        expected.update(_trained(cut))
    sample = merged_sample(cuts, trees=True)
    found = _trained(sample)
    assert found.keys() == expected.keys()
    assert all(abs(found[key] - expected[key]) < 1e-9 for key in expected)
    depth: list[int] = []
    for before in _path_predecessors(sample):
        depth.append(0 if before < 0 else depth[before] + 1)
    assert sample["position_ids"] == depth


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=9), st.lists(st.integers(0, 3), max_size=9)),
                min_size=1, max_size=20))
def test_common_prefixes_are_the_plain_ones(pairs: list[tuple[list[int], list[int]]]) -> None:
    flat = [token for a, b in pairs for token in (*a, *b)]
    words = np.array(flat + [0], dtype=np.uint16)
    starts, at = [], 0
    for a, b in pairs:
        starts.append((at, at + len(a)))
        at += len(a) + len(b)
    a_starts = np.array([s for s, _ in starts], dtype=np.int64)
    b_starts = np.array([s for _, s in starts], dtype=np.int64)
    limits = np.array([min(len(a), len(b)) for a, b in pairs], dtype=np.int64)
    found = common_prefixes(words, a_starts, b_starts, limits, 0x7FFF)
    assert found.tolist() == [_common(a, b) for a, b in pairs]

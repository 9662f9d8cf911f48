"""``extra_info`` reaches the trainer as LLaMA-Factory v1 hands it over (issue 52 item 3).

v1 (ff6d4d12) types ``extra_info`` as text in ``SFTSample``/``DPOSample`` (utils/types.py, "e.g.
kto_labels"), and ``Renderer.process_samples`` (core/rendering/rendering.py) copies it into every
model input it makes from the sample. With DATAIDX_LLAMAFACTORY naming v1's src, v1 itself
renders the samples here; else its rendered goldens are read, with ``extra_info`` added as
``process_samples`` adds it (``model_input["extra_info"] = sample["extra_info"]``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from dataidx import Collator, DataEngine, PackedDataset, model_inputs
from dataidx.cli import cli
from dataidx.index import build

from .helpers import GOLDEN, REPO, SHARED_DATA, read_jsonl, requires_shared, write_jsonl

RENDERED = GOLDEN / "render"
#: Rows of each golden dataset used here: those v1's rendered goldens hold (v1_sft_demo's first 150).
ROWS = {"v1_sft_demo": 150, "v1_dpo_demo": 10}


def run(*args: object) -> Any:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def info_of(dataset: str, row: int) -> str:
    return json.dumps({"dataset": dataset, "row": row, "kto_label": row % 2 == 0})


def _with_extra_info(folder: Path) -> Path:
    """The golden datasets' first rows, each with an ``extra_info``, in a config as v1 loads them."""
    lines = []
    for name, rows in ROWS.items():
        samples = read_jsonl(SHARED_DATA / f"{name}.jsonl")[:rows]
        write_jsonl(folder / f"{name}.jsonl", [{**sample, "extra_info": info_of(name, row)}
                                               for row, sample in enumerate(samples)])
        lines += [f"{name}:", f"  path: {folder / name}.jsonl", "  source: local"]
    return (folder / "config.yaml").write_text("\n".join(lines) + "\n") and folder / "config.yaml"


def v1_inputs(name: str) -> dict[tuple[int, int | None], dict[str, Any]]:
    """v1's model input of each entry ``(row, cut)`` of golden dataset ``name``'s rows used here."""
    index = [(row, cut) for row, cut in read_jsonl(GOLDEN / f"{name}.index.jsonl") if row < ROWS[name]]
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    if source:
        from transformers import AutoTokenizer

        from .conformance.v1 import v1_render, v1_renderer_class

        tokenizer = AutoTokenizer.from_pretrained(str(RENDERED / "chatml" / "tokenizer"))
        renderer = v1_renderer_class(Path(source))(tokenizer)
        samples = read_jsonl(SHARED_DATA / f"{name}.jsonl")
        made = {}
        for row, cut in index:
            sample = {**samples[row], "extra_info": info_of(name, row)}
            if cut is not None:
                sample["messages"] = sample["messages"][:cut]
            rendered = v1_render(renderer, sample)
            assert not isinstance(rendered, BaseException), rendered
            made[row, cut] = rendered
        return made
    lines = {(line["row"], line["cut"]): line for line in read_jsonl(RENDERED / "chatml" / f"{name}.jsonl")}
    return {(row, cut): {**lines[row, cut], "extra_info": info_of(name, row)} for row, cut in index}


def flat(served: dict[str, Any]) -> dict[str, Any]:
    """A served entry as v1 lays it out: a pair's chosen side then its rejected side."""
    if "chosen" not in served:
        return {key: served[key] for key in ("input_ids", "labels", "loss_weights", "extra_info")}
    sides = (served["chosen"], served["rejected"])
    return {**{key: sides[0][key] + sides[1][key] for key in ("input_ids", "labels", "loss_weights")},
            "extra_info": served["extra_info"]}


@requires_shared
@pytest.mark.slow
def test_extra_info_is_served_as_v1s_renderer_gives_it(tmp_path: Path) -> None:
    """Every entry of v1_sft_demo and v1_dpo_demo rows that carry extra_info, rendered on fetch and
    read from stored tokens (no source read), equals v1's model input, extra_info included."""
    build(_with_extra_info(tmp_path), tmp_path / "s.db")
    tokenizer = RENDERED / "chatml" / "tokenizer"
    for spec, extra in (("fetch", []), ("tokens", ["--store-tokens"])):
        result = run("render", tmp_path / "s.db", "--tokenizer", tokenizer, "--cutoff", 100000, "--name", spec, "-q",
                     *extra)
        assert result.exit_code == 0, result.output
    expected = {name: v1_inputs(name) for name in ROWS}
    for spec in ("fetch", "tokens"):
        with DataEngine(tmp_path / "s.db", render=spec) as engine:
            served = engine.reader.get_many(list(range(len(engine))))
            triples = engine.reader.reader.triples(engine.reader.positions_at(list(range(len(engine)))))
        assert len(served) == sum(map(len, expected.values()))
        for one, (_, row, cut) in zip(served, triples):
            v1 = expected[one["_dataset_name"]][row, cut]
            assert flat(one) == {key: v1[key] for key in ("input_ids", "labels", "loss_weights", "extra_info")}, \
                (spec, one["_dataset_name"], row, cut)


def _conversations(tmp_path: Path, tokenizer: Path, *merge: str) -> Path:
    """Multi-turn rows with extra_info, rendered with stored tokens, and packed."""
    turn = [{"role": "user", "content": [{"type": "text", "value": "What is a cut?"}], "loss_weight": 0.0},
            {"role": "assistant", "content": [{"type": "text", "value": "An entry of a conversation."}],
             "loss_weight": 1.0}]
    rows = [{"messages": turn * (1 + row % 3), "extra_info": info_of("talk", row)} for row in range(9)]
    config = tmp_path / "talk.yaml"
    config.write_text(f"talk:\n  path: {write_jsonl(tmp_path / 'talk.jsonl', rows)}\n  source: local\n")
    build(config, tmp_path / "talk.db")
    for command in (["render", "--tokenizer", tokenizer, "--cutoff", 512, "--store-tokens"],
                    ["pack", "--spec", "default", "--capacity", 256, *merge]):
        result = run(command[0], tmp_path / "talk.db", *command[1:])
        assert result.exit_code == 0, result.output
    return tmp_path / "talk.db"


@pytest.mark.parametrize("merge", [[], ["--merge-cuts"]], ids=["packs", "merged-cuts"])
def test_packs_and_the_collator_carry_extra_info(tmp_path: Path, tiny_tokenizer: Path, merge: list[str]) -> None:
    """A pack's members (a merged conversation's sequence: its row's) carry their rows' extra_info,
    and so does every Collator batch, one per row or per packed sample; the model never gets it."""
    store = _conversations(tmp_path, tiny_tokenizer, *merge)
    collate = Collator(pad_token_id=0, weighted=True)
    with DataEngine(store, render="default") as engine:
        entries = [engine[k] for k in range(len(engine))]
        rows = engine.reader.reader.triples(engine.reader.positions_at(list(range(len(engine)))))
    assert [entry["extra_info"] for entry in entries] == [info_of("talk", row) for _, row, _ in rows]
    padded = collate(entries[:4])
    assert padded["extra_info"] == [entry["extra_info"] for entry in entries[:4]]
    assert "extra_info" not in model_inputs(padded)
    with PackedDataset(store) as packs:
        members = [packs[k] for k in range(len(packs))]
    for pack in members:
        for sample in pack:
            assert json.loads(sample["extra_info"])["dataset"] == "talk"
    batch = collate(members[:2])
    assert batch["extra_info"] == [[sample["extra_info"] for sample in pack] for pack in members[:2]]
    assert int(batch["sample_ids"].max()) == max(len(pack) for pack in members[:2])
    if merge:  # a merged conversation is one sequence of its row: every cut's extra_info is its row's
        assert sum(len(pack) for pack in members) < len(entries)
    assert "extra_info" not in collate([[{k: v for k, v in s.items() if k != "extra_info"} for s in members[0]]])


def test_token_parquet_keeps_extra_info_and_megatron_says_once_it_cannot(tmp_path: Path, tiny_tokenizer: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    store = _conversations(tmp_path, tiny_tokenizer)
    assert run("export", store, "-o", tmp_path / "entries", "--format", "parquet", "--spec", "default").exit_code == 0
    with DataEngine(store, render="default") as engine:
        served = [engine[k]["extra_info"] for k in range(len(engine))]
    assert pq.read_table(tmp_path / "entries" / "data.parquet")["extra_info"].to_pylist() == served
    assert run("export", store, "-o", tmp_path / "packs", "--format", "parquet", "--plan", "default").exit_code == 0
    with PackedDataset(store) as packs:
        members = [[sample["extra_info"] for sample in packs[k]] for k in range(len(packs))]
    assert pq.read_table(tmp_path / "packs" / "data.idx.parquet")["extra_info"].to_pylist() == members
    with caplog.at_level(logging.WARNING, logger="dataidx"):
        assert run("export", store, "-o", tmp_path / "mega", "--format", "megatron", "--spec", "default").exit_code == 0
    said = [record.getMessage() for record in caplog.records if "extra_info" in record.getMessage()]
    assert len(said) == 1 and "training entry 0 and others carry extra_info" in said[0] \
        and "--format parquet keeps it" in said[0], said


def test_the_sample_export_keeps_extra_info(tmp_path: Path, tiny_tokenizer: Path) -> None:
    """``dataidx export`` of samples to Parquet (and ``to_hf``) has v1's ``extra_info`` column; it
    used to refuse every sample holding one."""
    store = _conversations(tmp_path, tiny_tokenizer)
    assert run("export", store, "-o", tmp_path / "samples.parquet").exit_code == 0
    with DataEngine(store) as engine:
        served = [engine[k]["extra_info"] for k in range(len(engine))]
    assert pq.read_table(tmp_path / "samples.parquet")["extra_info"].to_pylist() == served


@pytest.mark.parametrize("value", [{"kto_label": True}, True, 3])
def test_extra_info_that_is_not_text_is_refused_at_build(tmp_path: Path, value: object) -> None:
    """v1 types extra_info as text; a dict or a bool would be stored as something else. One line
    naming the dataset, row and key; no store written."""
    turn = [{"role": "user", "content": [{"type": "text", "value": "Hi"}]},
            {"role": "assistant", "content": [{"type": "text", "value": "Hello"}]}]
    rows = [{"messages": turn, "extra_info": None}, {"messages": turn, "extra_info": value}]
    config = tmp_path / "c.yaml"
    config.write_text(f"odd:\n  path: {write_jsonl(tmp_path / 'odd.jsonl', rows)}\n  source: local\n")
    result = run("build", config, "-o", tmp_path / "s.db", "-q")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "dataset 'odd'" in result.output and "row 1" in result.output and "extra_info is a" in result.output
    assert "not text" in result.output and not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("labels", [("true", "false"), (True, 0), (True, None)])
def test_a_kto_label_that_is_not_true_or_false_is_refused(tmp_path: Path, labels: tuple[object, object]) -> None:
    """The text "false" would read as a desirable answer: one line naming the row and key. (A
    column mixing true with "false" reaches the converter as booleans: the JSON loader casts it.)"""
    rows = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
             "label": label} for label in labels]
    config = tmp_path / "c.yaml"
    config.write_text(f"kto:\n  path: {write_jsonl(tmp_path / 'kto.jsonl', rows)}\n  source: local\n  converter: kto\n")
    result = run("build", config, "-o", tmp_path / "s.db", "-q")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "dataset 'kto'" in result.output and f"row {0 if labels[0] == 'true' else 1}" in result.output
    assert "key 'label'" in result.output
    assert "not true or false" in result.output and not (tmp_path / "s.db").exists()


@requires_shared
def test_llamafactorys_kto_demo_trains_each_last_answer_with_its_label(tmp_path: Path, tiny_tokenizer: Path) -> None:
    """kto_en_demo.json under converter kto: one entry per row, its last answer supervised (earlier
    ones are the prompt), its label as extra_info."""
    demo = json.loads((SHARED_DATA / "kto_en_demo.json").read_text(encoding="utf-8"))
    config = tmp_path / "kto.yaml"
    config.write_text(f"kto:\n  path: {SHARED_DATA / 'kto_en_demo.json'}\n  source: local\n  converter: kto\n")
    built = build(config, tmp_path / "s.db")
    assert built.datasets[0].rows == built.datasets[0].entries == len(demo) == 300
    with DataEngine(tmp_path / "s.db") as engine:
        samples = [engine[k] for k in range(len(engine))]
        rows = [row for _, row, _ in engine.reader.triples(list(range(len(engine))))]
    for sample, row in zip(samples, rows):
        assert json.loads(sample["extra_info"]) == {"kto_label": demo[row]["label"]}
        weights = [message["loss_weight"] for message in sample["messages"]]
        assert weights[-1] == 1.0 and sum(weights) == 1.0 and sample["messages"][-1]["role"] == "assistant"
        assert len(sample["messages"]) == len(demo[row]["messages"])


@pytest.mark.slow
def test_the_documented_kto_recipe_trains_each_answer_by_its_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """docs/rendering.md's KTO recipe as written, on data/demo_kto.yaml: every batch's labels are
    its rows' (read from the data file, not from extra_info), each row trains its last answer
    only, and the recipe's loss equals TRL's KTO loss computed here by hand from those."""
    from .test_training_order import _tiny_llama

    text = (REPO / "docs" / "rendering.md").read_text(encoding="utf-8")
    recipe = text[text.index("## extra_info, and a KTO recipe"):]
    shell = recipe.split("```bash\n", 1)[1].split("```", 1)[0]
    functions, usage = (block.split("```", 1)[0] for block in recipe.split("```python\n")[1:3])
    monkeypatch.chdir(REPO)  # the YAML's paths are relative to the repository root
    for line in shell.strip().splitlines():
        words = line.split()
        assert words[:1] == ["dataidx"]
        result = run(*[str(tmp_path / word) if word == "kto.db" else word for word in words[1:]])
        assert result.exit_code == 0, result.output
    monkeypatch.chdir(tmp_path)
    labels = [row["label"] for row in read_jsonl(REPO / "data" / "demo_kto.jsonl")]
    namespace: dict[str, Any] = {}
    exec(compile(functions, "docs/rendering.md", "exec"), namespace)
    with DataEngine("kto.db", render="default") as engine:
        assert len(engine) == len(labels)  # one entry per row
        rows = [row for _, row, _ in engine.reader.reader.triples(engine.reader.positions_at(list(range(8))))]
        model, reference = _tiny_llama(4096, 1.0), _tiny_llama(4096, 0.5)
        batch = Collator(pad_token_id=0, weighted=True)([engine[k] for k in range(len(engine))])
    assert [json.loads(info)["kto_label"] for info in batch["extra_info"]] == [labels[row] for row in rows]
    # Each row trains its last answer alone: the two-answer rows' first answer ("user") is prompt.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(REPO / "data" / "demo_tokenizer"))
    answers = [row_messages[-1]["content"] for row_messages in
               (row["messages"] for row in read_jsonl(REPO / "data" / "demo_kto.jsonl"))]
    for k, row in enumerate(rows):
        supervised = batch["labels"][k][batch["labels"][k] != -100].tolist()
        assert tokenizer.decode(supervised).startswith(answers[row]), (row, tokenizer.decode(supervised))
        assert int((batch["loss_weights"][k] > 0).sum()) == len(supervised)
        assert "user" not in tokenizer.decode(supervised)
    desirable = torch.tensor([labels[row] for row in rows])
    with torch.no_grad():
        def answer(network: Any) -> torch.Tensor:
            logits = network(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             position_ids=batch["position_ids"]).logits[:, :-1]
            target = batch["labels"][:, 1:]
            logps = -torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=-100,
                                                       reduction="none").view(target.shape)
            return logps.sum(-1)
        ratio = answer(model) - answer(reference)
        by_hand = torch.where(desirable, 1 - torch.sigmoid(0.1 * ratio), 1 - torch.sigmoid(-0.1 * ratio)).mean()
        loss = namespace["kto_loss"](model, reference, batch)
    assert abs(float(loss) - float(by_hand)) < 1e-5 and float(ratio.abs().min()) > 0
    # The usage block runs as written, its loop's first step a real backward pass.
    steps = {**namespace, "model": model, "reference": reference}
    try:
        exec(compile(usage.replace("for batch in loader:", "for batch in list(loader)[:1]:"), "docs/rendering.md",
                     "exec"), steps)
    finally:
        steps["engine"].close()
    assert any(parameter.grad is not None for parameter in model.parameters())

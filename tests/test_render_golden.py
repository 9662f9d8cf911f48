"""Rendered entries equal what LLaMA-Factory v1's own Renderer made of the golden samples, line by
line, for both tokenizers stored beside them: through ``dataidx render`` + ``DataEngine(render=)``,
through ``dataidx show --render``, and through ``PackedDataset`` + ``Collator``; rendered on fetch,
and served from tokens stored by ``dataidx render --store-tokens`` (spec ``NAME-tokens``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx import Collator, DataEngine, PackedDataset
from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import IGNORE, Renderer, load_tokenizer
from dataidx.store import run_query

from .helpers import GOLDEN, golden_config, read_jsonl, requires_shared

pytestmark = [requires_shared, pytest.mark.slow]  # LLaMA-Factory v1's rendered goldens, end to end

RENDERED = GOLDEN / "render"
TOKENIZERS = ("chatml", "llama3")
SFT = ["alpaca_en_demo", "identity", "inject_demo", "glaive_toolcall_en_demo", "v1_sft_demo"]
PREFERENCE = ["pair_demo", "v1_dpo_demo"]
FIELDS = ("input_ids", "labels", "loss_weights")


def golden_lines(tokenizer: str, names: list[str]) -> list[tuple[str, dict]]:
    return [(name, line) for name in names for line in read_jsonl(RENDERED / tokenizer / f"{name}.jsonl")]


def as_v1(served: dict) -> dict:
    """dataidx's rendered entry in v1's layout: a preference pair is chosen then rejected, end to
    end, with ``token_type_ids`` 1 and 2."""
    if "chosen" not in served:
        return {field: served[field] for field in FIELDS}
    chosen, rejected = served["chosen"], served["rejected"]
    v1 = {field: chosen[field] + rejected[field] for field in FIELDS}
    v1["token_type_ids"] = [1] * len(chosen["input_ids"]) + [2] * len(rejected["input_ids"])
    return v1


def expected(line: dict) -> dict:
    return {field: line[field] for field in (*FIELDS, "token_type_ids") if field in line}


def render(store: Path) -> None:
    for tokenizer in TOKENIZERS:
        for name, extra in ((tokenizer, []), (f"{tokenizer}-tokens", ["--store-tokens"])):
            result = CliRunner().invoke(cli, ["render", str(store), "--tokenizer",
                                              str(RENDERED / tokenizer / "tokenizer"), "--cutoff", "100000",
                                              "--name", name, "-q", *extra])
            assert result.exit_code == 0, result.output

#: Each tokenizer's spec rendered on fetch, and the same spec served from stored tokens.
SPECS = [(tokenizer, spec) for tokenizer in TOKENIZERS for spec in (tokenizer, f"{tokenizer}-tokens")]


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Every rendered golden dataset in one store, rendered with both tokenizers; and the
    mixture position of every ``(dataset, row, cut)``."""
    folder = tmp_path_factory.mktemp("golden-render")
    (folder / "config.yaml").write_text(golden_config(SFT + PREFERENCE))
    store = folder / "golden.db"
    build(folder / "config.yaml", store)
    render(store)
    _, rows = run_query(store, "SELECT position, dataset, row, cut FROM entries WHERE mixture = 'default'")
    return store, {(dataset, row, cut): position for position, dataset, row, cut in rows}


def test_every_rendered_golden_file_is_covered() -> None:
    for tokenizer in TOKENIZERS:
        assert {p.stem for p in (RENDERED / tokenizer).glob("*.jsonl")} == set(SFT + PREFERENCE)


@pytest.mark.parametrize(("tokenizer", "spec"), SPECS)
def test_data_engine_serves_v1s_input_ids_labels_and_loss_weights(golden_store, tokenizer: str, spec: str) -> None:
    store, positions = golden_store
    with DataEngine(store, render=spec) as engine:
        assert (engine.reader.tokens is not None) is spec.endswith("-tokens")
        assert len(engine) == len(positions)  # every golden entry trains, so engine index = position
        lines = golden_lines(tokenizer, SFT + PREFERENCE)
        served = engine[[positions[(name, line["row"], line["cut"])] for name, line in lines]]
        mismatched = [(name, line["row"], line["cut"]) for (name, line), one in zip(lines, served)
                      if as_v1(one) != expected(line)]
        assert not mismatched and len(lines) == 594


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_show_render_prints_v1s_entries(golden_store, tokenizer: str) -> None:
    store, positions = golden_store
    lines = golden_lines(tokenizer, SFT + PREFERENCE)
    wanted = [str(positions[(name, line["row"], line["cut"])]) for name, line in lines]
    result = CliRunner().invoke(cli, ["show", str(store), *wanted, "--render", tokenizer])
    assert result.exit_code == 0, result.output
    shown = [json.loads(text) for text in result.output.splitlines()]
    assert [one["status"] for one in shown] == ["ok"] * len(lines) == ["ok"] * 594
    assert [as_v1(one) for one in shown] == [expected(line) for _, line in lines]


@pytest.mark.parametrize(("tokenizer", "spec"), SPECS)
def test_packed_rows_hold_v1s_entries_end_to_end(golden_store, tmp_path: Path, tokenizer: str, spec: str) -> None:
    # Preference pairs are not packed: pack a mixture of the SFT datasets, every one of their entries.
    store, _ = golden_store
    (tmp_path / "sft.yaml").write_text(golden_config(SFT))
    runner = CliRunner()
    if "'sft'" not in runner.invoke(cli, ["info", str(store)]).output:
        assert runner.invoke(cli, ["mix", str(store), str(tmp_path / "sft.yaml"), "--name", "sft"]).exit_code == 0
    plan = f"sft-{spec}"
    result = runner.invoke(cli, ["pack", str(store), "--spec", spec, "--mixture", "sft", "--capacity", "4096",
                                 "--name", plan])
    assert result.exit_code == 0, result.output
    golden = {(name, line["row"], line["cut"]): line for name, line in golden_lines(tokenizer, SFT)}
    _, members = run_query(store, "SELECT m.pack, e.dataset, e.row, e.cut FROM pack_members AS m JOIN entries AS e "
                                  "ON e.mixture = 'sft' AND e.position = m.position WHERE m.plan = ? "
                                  "ORDER BY m.pack, m.slot", [plan])
    by_pack: dict[int, list[tuple]] = {}
    for pack, *entry in members:
        by_pack.setdefault(pack, []).append(tuple(entry))
    collate, compared = Collator(pad_token_id=0), 0
    with PackedDataset(store, plan=plan) as packs:
        assert (packs.packs.tokens is not None) is spec.endswith("-tokens")
        for number, entries in by_pack.items():
            samples = packs[number]
            batch = collate([samples])
            start = 0
            for slot, (sample, entry) in enumerate(zip(samples, entries)):
                stop = start + len(sample["input_ids"])
                line = golden.get(entry)
                if line is not None:  # v1 rendered the first 150 entries of the big datasets, every one of the rest
                    labels, weights = list(line["labels"]), list(line["loss_weights"])
                    if slot:  # a packed sample's first token is not predicted from the one before
                        labels[0], weights[0] = IGNORE, 0.0
                    assert batch["input_ids"][0, start:stop].tolist() == line["input_ids"], entry
                    assert batch["labels"][0, start:stop].tolist() == labels, entry
                    assert batch["loss_weights"][0, start:stop].tolist() == pytest.approx(weights), entry
                    compared += 1
                start = stop
    assert compared == len(golden) == 547


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_control_tokens_in_data_never_reach_the_ids(golden_store, tokenizer: str) -> None:
    # inject_demo hides turn markers, BOS and end-of-text in user, system and assistant text.
    store, positions = golden_store
    loaded = load_tokenizer(RENDERED / tokenizer / "tokenizer")
    controls = Renderer(loaded, loaded.chat_template, cutoff=100000).controls
    with DataEngine(store) as engine:
        benign = Renderer(loaded, loaded.chat_template, cutoff=100000)
        for line in read_jsonl(RENDERED / tokenizer / "inject_demo.jsonl"):
            sample = engine[positions[("inject_demo", line["row"], line["cut"])]]
            for message in sample["messages"]:
                for block in message["content"]:
                    for string in controls.strings:
                        block["value"] = block["value"].replace(string, "x")
            clean = benign.render(sample, has_cut=True)
            assert Counter(t for t in line["input_ids"] if t in controls.ids) == \
                Counter(t for t in clean.input_ids if t in controls.ids)

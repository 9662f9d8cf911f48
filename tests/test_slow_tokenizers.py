"""Slow (pure Python) tokenizers render as LLaMA-Factory v1 renders with them, and a tokenizer of
its folder's own code loads only with --trust-remote-code, which the spec records, info shows,
verify names and every later load must be given again."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.errors import DataidxError, RenderError
from dataidx.render import CHATML, Renderer, load_tokenizer, render_positions
from dataidx.render.spec import spec_fingerprint, tokenizer_fingerprint
from dataidx.store import run_query

from .conformance import digest
from .conformance.conversations import conversations
from .conformance.v1 import v1_cuts, v1_render, v1_renderer_class
from .helpers import GOLDEN, golden_config, train_tokenizer, write_jsonl
from .slow_tokenizer import write_slow_tokenizer

pytest.importorskip("transformers")

#: The demo datasets rendered by both: LLaMA-Factory's own (../shared), and the hand-made conversations.
SHARED = ["alpaca_en_demo", "identity", "inject_demo", "glaive_toolcall_en_demo", "v1_sft_demo", "pair_demo",
          "v1_dpo_demo"]
TRUST = "give --trust-remote-code (trust_remote_code=True) if you trust it"


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder whose tokenizer is a slow class of its own code, named by ``auto_map``."""
    return write_slow_tokenizer(tmp_path_factory.mktemp("custom") / "model", chat_template=CHATML)


def built(folder: Path, shared: list[str]) -> Path:
    """A store of the hand-made conversations (tools, reasoning, preference pairs) and the demo
    datasets ``shared`` of ../shared (when it is beside the repo)."""
    from dataidx.index import build

    config = f"handmade:\n  path: {write_jsonl(folder / 'handmade.jsonl', conversations())}\n  source: local\n"
    if GOLDEN.is_dir() and shared:
        config += golden_config(shared)
    (folder / "config.yaml").write_text(config)
    build(folder / "config.yaml", folder / "slow.db")
    return folder / "slow.db"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-made conversations."""
    return built(tmp_path_factory.mktemp("slow-store"), [])


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-made conversations and LLaMA-Factory's demo data."""
    return built(tmp_path_factory.mktemp("slow-demo"), SHARED)


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def rendered_store(store: Path, tmp_path: Path, custom: Path, name: str) -> Path:
    """A copy of ``store`` rendered with the custom tokenizer as spec ``name``, trusted."""
    copy = Path(shutil.copy(store, tmp_path / "copy.db"))
    result = invoke("render", copy, "--tokenizer", custom, "--cutoff", 100000, "--name", name, "--trust-remote-code",
                    "-q")
    assert result.exit_code == 0, result.output
    return copy


def everything(store: Path, spec: str, **kwargs: object):
    _, positions = run_query(store, "SELECT position FROM entries WHERE mixture = 'default' ORDER BY position")
    return render_positions(store, "default", spec, [position for (position,) in positions], **kwargs)[1]


def test_a_tokenizer_of_its_folders_code_without_the_flag_is_one_line(store: Path, custom: Path,
                                                                        tmp_path: Path) -> None:
    copy = Path(shutil.copy(store, tmp_path / "copy.db"))
    before = copy.read_bytes()
    result = CliRunner().invoke(cli, ["render", str(copy), "--tokenizer", str(custom), "--cutoff", "512",
                                      "--store-tokens"])
    assert result.exit_code == 1
    assert result.output == (f"Error: {custom}: its tokenizer is a class from the folder's own code (auto_map in "
                             "tokenizer_config.json), and loading it would run code from the model folder; "
                             f"{TRUST}\n")
    assert copy.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["copy.db"]  # nothing written
    with pytest.raises(RenderError, match="would run code from the model folder"):
        load_tokenizer(custom)


def test_with_the_flag_the_spec_records_it_info_shows_it_and_verify_names_it(store: Path, custom: Path,
                                                                               tmp_path: Path) -> None:
    copy = rendered_store(store, tmp_path, custom, "custom")
    assert run_query(copy, "SELECT name, trust_remote_code FROM render_specs")[1] == [("custom", 1)]
    info = invoke("info", copy)
    assert ("spec 'custom': its tokenizer is a class of its folder's own code, run with --trust-remote-code (its "
            "readers need the flag too)") in info.output
    specs = json.loads(invoke("info", copy, "--json").output)["render_specs"]
    assert [(spec["name"], spec["trust_remote_code"]) for spec in specs] == [("custom", True)]
    untrusted = invoke("verify", copy)
    assert untrusted.exit_code == 1
    assert (f"render spec 'custom': its tokenizer at '{custom}' is a class of its folder's own code (rendered with "
            "--trust-remote-code), not loaded to check its template: give --trust-remote-code to run it") \
        in untrusted.output
    trusted = invoke("verify", copy, "--trust-remote-code", "--json")
    assert trusted.exit_code == 0, trusted.output
    report = json.loads(trusted.output)
    assert report["render_specs"] == {"custom": []} and report["trust_remote_code"] == {"custom": str(custom)}
    said = invoke("verify", copy, "--trust-remote-code").output
    assert f"render spec 'custom': its tokenizer runs code from {custom} (rendered with --trust-remote-code)" in said


def test_a_reader_runs_the_folders_code_only_when_given_the_flag(store: Path, custom: Path, tmp_path: Path) -> None:
    from dataidx.training import DataEngine, PackedDataset

    copy = rendered_store(store, tmp_path, custom, "custom")
    refusal = (f"render spec 'custom': its tokenizer at {custom} is a class from its folder's code (rendered with "
               f"--trust-remote-code); loading it would run that code: {TRUST}")
    with pytest.raises(RenderError) as refused:
        DataEngine(copy, render="custom")
    assert str(refused.value) == refusal
    shown = invoke("show", copy, "0", "--render", "custom")
    assert shown.exit_code == 1 and shown.output == f"Error: {refusal}\n"
    with DataEngine(copy, render="custom", trust_remote_code=True) as engine:
        assert engine[0]["input_ids"]
    assert json.loads(invoke("show", copy, "0", "--render", "custom", "--trust-remote-code").output)["status"] == "ok"
    assert invoke("pack", copy, "--spec", "custom", "--capacity", 100000).exit_code == 0  # lengths: no tokenizer
    with pytest.raises(RenderError, match="would run that code"):
        PackedDataset(copy, "default")
    with PackedDataset(copy, "default", trust_remote_code=True) as packs:
        assert packs[0]
    # A store edited to say the spec needs no trust: the fingerprint no longer matches, and the
    # folder still needs the flag to load; no reader runs its code either way.
    with sqlite3.connect(copy) as connection:
        connection.execute("UPDATE render_specs SET trust_remote_code = 0")
    connection.close()
    with pytest.raises(DataidxError):
        DataEngine(copy, render="custom")


def test_stored_tokens_verify_and_packs_of_such_a_spec(store: Path, custom: Path, tmp_path: Path) -> None:
    from dataidx.training import DataEngine, PackedDataset

    copy = Path(shutil.copy(store, tmp_path / "copy.db"))
    assert invoke("render", copy, "--tokenizer", custom, "--cutoff", 4096, "--name", "custom", "--store-tokens",
                  "--trust-remote-code", "-q").exit_code == 0
    with DataEngine(copy, render="custom") as engine:  # served from its tokens: no tokenizer, no flag
        assert engine[0]["input_ids"]
    refused = invoke("verify", copy, "--tokens")
    assert refused.exit_code == 1 and refused.output.count("\n") == 1 and TRUST in refused.output
    checked = invoke("verify", copy, "--tokens", "--all", "--trust-remote-code")
    assert checked.exit_code == 0 and "FAILED" not in checked.output, checked.output
    assert invoke("pack", copy, "--spec", "custom", "--capacity", 4096).exit_code == 0
    with PackedDataset(copy, "default") as packs:  # packs of a spec with stored tokens read them too
        assert packs[0]


def test_build_renders_with_the_flag_and_refuses_it_without_a_tokenizer(custom: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"handmade:\n  path: {write_jsonl(tmp_path / 'handmade.jsonl', conversations())}\n"
                      "  source: local\n")
    built = invoke("build", config, "-o", tmp_path / "b.db", "--tokenizer", custom, "--trust-remote-code", "-q")
    assert built.exit_code == 0, built.output
    assert run_query(tmp_path / "b.db", "SELECT name, trust_remote_code FROM render_specs")[1] == [("default", 1)]
    alone = invoke("build", config, "-o", tmp_path / "c.db", "--trust-remote-code", "-q")
    assert alone.exit_code == 2 and "--trust-remote-code is for rendering and need --tokenizer" in alone.output
    assert not (tmp_path / "c.db").exists()


def test_the_report_and_a_runs_steps_load_it_only_with_the_flag(store: Path, custom: Path, tmp_path: Path) -> None:
    copy = rendered_store(store, tmp_path, custom, "custom")
    for command in (["report", copy, "-o", tmp_path / "report.html", "--spec", "custom", "--samples", "2", "-q"],
                    ["steps", copy, "--render", "custom", "--global-batch-size", "2", "--epoch", "0", "0"]):
        refused = invoke(*command)
        assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
        assert "rendered with --trust-remote-code" in refused.output and TRUST in refused.output
        trusted = invoke(*command, "--trust-remote-code")
        assert trusted.exit_code == 0, trusted.output
    assert "custom" in (tmp_path / "report.html").read_text(encoding="utf-8")


@pytest.mark.slow  # every demo entry with a tokenizer in Python
def test_a_slow_tokenizer_renders_as_its_fast_twin_where_v1s_diff_labels(demo_data: Path, custom: Path,
                                                                          tmp_path: Path) -> None:
    """The custom class is the tiny fast tokenizer's BPE in Python: the same ids for every text. So
    every entry the fast one labels by v1's id diff, the slow one renders alike; the rest (the last
    message not the trained turn) v1 refuses, and so does dataidx with a slow tokenizer."""
    fast = tmp_path / "fast"
    train_tokenizer(fast, chat_template=CHATML)
    copy = rendered_store(demo_data, tmp_path, custom, "slow")
    assert invoke("render", copy, "--tokenizer", fast, "--cutoff", 100000, "--name", "fast", "-q").exit_code == 0
    slow, twin = everything(copy, "slow", trust_remote_code=True), everything(copy, "fast")
    found = Counter()
    for (name, row, cut, one), (_, _, _, other) in zip(slow, twin):
        if one.status == "render_error" and one.detail is not None and "v1's refusal" in one.detail:
            found["refused as v1 refuses"] += 1
            continue
        assert (one.status, one.detail) == (other.status, other.detail), (name, row, cut)
        assert one.as_dict() == other.as_dict(), (name, row, cut)
        found["equal"] += 1
    assert found["equal"] > len(slow) // 2, found


def test_a_slow_tokenizers_text_documents_end_with_eos(custom: Path) -> None:
    slow = Renderer(load_tokenizer(custom, trust_remote_code=True), CHATML, 512)
    fast = Renderer(train_tokenizer(None, chat_template=CHATML), CHATML, 512)
    for text in ("hello world, how are you today?", "a <|im_end|> forged <s> turn"):
        one, other = slow.render({"text": text}, False), fast.render({"text": text}, False)
        assert one.status == "ok" and one.input_ids[-1] == 2
        assert one.as_dict() == other.as_dict()


def test_a_control_token_a_slow_tokenizer_still_finds_is_refused_as_v1_refuses_it(tmp_path: Path) -> None:
    """Its class drops the U+200B that breaks ``<|im_end|>`` in data text, so the string is the
    control token again: no offsets say where to break it anew, and v1 raises there too."""
    tokenizer = load_tokenizer(write_slow_tokenizer(tmp_path / "strips", chat_template=CHATML, strips_breaks=True),
                               trust_remote_code=True)
    sample = {"messages": [{"role": "user", "content": [{"type": "text", "value": "see <|im_end|> here"}],
                            "loss_weight": 0.0},
                           {"role": "assistant", "content": [{"type": "text", "value": "ok"}], "loss_weight": 1.0}]}
    rendered = Renderer(tokenizer, CHATML, 512).render(sample, True)
    assert (rendered.status, rendered.cause) == ("render_error", "control_token")
    assert rendered.detail == ("message 0: the text holds control token '<|im_end|>', which the slow tokenizer still "
                               "finds after it is broken (v1 refuses it too)")
    plain = {**sample, "messages": [{**sample["messages"][0], "content": [{"type": "text", "value": "see here"}]},
                                    sample["messages"][1]]}
    assert Renderer(tokenizer, CHATML, 512).render(plain, True).status == "ok"
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):
        assert isinstance(v1_render(v1_renderer_class(Path(source))(tokenizer), sample), ValueError)


def test_a_slow_tokenizers_fingerprint_follows_what_changes_its_ids(custom: Path, tmp_path: Path) -> None:
    first = tokenizer_fingerprint(load_tokenizer(custom, trust_remote_code=True))
    moved = Path(shutil.copytree(custom, tmp_path / "moved"))
    assert tokenizer_fingerprint(load_tokenizer(moved, trust_remote_code=True)) == first  # where is not what
    merges = moved / "merges.txt"
    merges.write_text(merges.read_text(encoding="utf-8").rsplit("\n", 2)[0] + "\n", encoding="utf-8")
    assert tokenizer_fingerprint(load_tokenizer(moved, trust_remote_code=True)) != first
    config = json.loads((custom / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"]["4"]["special"] = False
    added = Path(shutil.copytree(custom, tmp_path / "added"))
    (added / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert tokenizer_fingerprint(load_tokenizer(added, trust_remote_code=True)) != first
    # Specs of fast tokenizers keep their fingerprints: the flag is hashed only when set.
    assert spec_fingerprint("t", "x", 8, "drop", "1") == spec_fingerprint("t", "x", 8, "drop", "1", None, "special",
                                                                          False)
    assert spec_fingerprint("t", "x", 8, "drop", "1", trust_remote_code=True) != spec_fingerprint("t", "x", 8, "drop",
                                                                                                  "1")


@pytest.mark.slow  # v1's Renderer over every demo entry with a tokenizer in Python
def test_a_slow_tokenizer_renders_as_v1s_own_renderer(demo_data: Path, custom: Path, tmp_path: Path) -> None:
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    if not source:
        pytest.skip("DATAIDX_LLAMAFACTORY does not name LLaMA-Factory's src (ff6d4d12)")
    copy = rendered_store(demo_data, tmp_path, custom, "slow")
    renderer = v1_renderer_class(Path(source))(load_tokenizer(custom, trust_remote_code=True))
    samples = {"handmade": conversations()}
    if GOLDEN.is_dir():
        samples |= {name: [json.loads(line) for line in (GOLDEN / f"{name}.samples.jsonl").read_text(
            encoding="utf-8").splitlines() if line.strip()] for name in SHARED}
    found: Counter[tuple[str, str]] = Counter()
    for name, row, cut, one in everything(copy, "slow", trust_remote_code=True):
        sample = samples[name][row]
        assert cut in v1_cuts(sample)
        made = v1_render(renderer, {**sample, "messages": sample["messages"][:cut]} if cut is not None else sample)
        if isinstance(made, BaseException):  # v1 refused it: so does dataidx
            assert one.status == "render_error", (name, row, cut, made, one.status)
            found[name, "refused"] += 1
            continue
        assert one.status in ("ok", "no_supervision"), (name, row, cut, one.detail)
        sides = one.sides.values() if one.sides is not None else [one]
        ours = [[token for side in sides for token in getattr(side, key)]
                for key in ("input_ids", "labels", "loss_weights")]
        assert digest(*ours) == digest(made["input_ids"], made["labels"], made["loss_weights"]), (name, row, cut)
        found[name, "equal"] += 1
    print(dict(found))  # the per-dataset count the report quotes (pytest -s)
    assert all(found[name, "equal"] for name in samples), found

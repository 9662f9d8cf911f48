"""What a newcomer hits in the first hour (issue 23): each test is one mistake, made through the
real CLI, and holds dataidx to the exact one line and exit code it answers with.

The CLI runs in this process (click's runner over the console script's command, in the test's
folder): a process of its own would cost two seconds of imports a command, a minute over this
module. The README's walkthrough still runs each command as a process, as a user types it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli

from .helpers import REPO, SHARED_DATA, alpaca_rows, chat_rows, requires_shared, write_jsonl, write_yaml

pytestmark = pytest.mark.slow  # builds, renders and packs, many times a test


def dataidx(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """``dataidx ARGS`` run in ``cwd``, in this process: its exit code, stdout and stderr (with the
    traceback of an exception the command let out, as Python would print it)."""
    before = os.getcwd()  # contextlib.chdir is Python 3.11+; dataidx supports 3.10
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(map(str, args)), prog_name="dataidx")
    finally:
        os.chdir(before)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["dataidx", *map(str, args)], result.exit_code, result.stdout, stderr)


def dataidx_process(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """``dataidx ARGS`` as a process of its own, as a user types it."""
    return subprocess.run([sys.executable, "-m", "dataidx", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def refused(result: subprocess.CompletedProcess, line: str, code: int = 1) -> None:
    """Exit ``code`` and exactly ``line`` on stderr (click's usage errors add their usage lines)."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    if code == 1:
        assert result.stderr == f"Error: {line}\n", result.stderr
    else:
        assert result.stderr.rstrip("\n").splitlines()[-1] == f"Error: {line}", result.stderr


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A folder with an alpaca and a sharegpt dataset and the YAML of both (relative paths)."""
    write_jsonl(tmp_path / "alpaca.jsonl", alpaca_rows(6))
    write_jsonl(tmp_path / "chat.jsonl", chat_rows([1, 2, 3]))
    write_yaml(tmp_path / "sft.yaml", "alp:\n  path: alpaca.jsonl\n  source: local\n  converter: alpaca\n"
               "chat:\n  path: chat.jsonl\n  source: local\n  converter: sharegpt\n")
    return tmp_path


# Item 4: a tokenizer that is not one, and render options without a tokenizer.

def test_a_tokenizer_that_is_not_one_is_one_line(demo: Path) -> None:
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    (demo / "model").mkdir()
    (demo / "model" / "tokenizer_config.json").write_text("{}")
    refused(dataidx("render", "s.db", "--tokenizer", ".", "--cutoff", "64", cwd=demo),
            ".: not a tokenizer folder: it holds none of tokenizer.json, tokenizer_config.json, tokenizer.model, "
            "vocab.json, tiktoken.model; give a local model folder")
    refused(dataidx("render", "s.db", "--tokenizer", "sft.yaml", "--cutoff", "64", cwd=demo),
            "sft.yaml: not a tokenizer; give a local model folder (with tokenizer.json and tokenizer_config.json) "
            "or its tokenizer.json")
    result = dataidx("render", "s.db", "--tokenizer", "model", "--cutoff", "64", cwd=demo)
    refused(result, "model: cannot load a fast tokenizer: the folder has no tokenizer.json (save one there with "
                    "AutoTokenizer.from_pretrained(...).save_pretrained)")
    assert "sentencepiece" not in result.stderr and "\\x0a" not in result.stderr


def test_render_options_without_a_tokenizer_are_a_usage_error(demo: Path) -> None:
    refused(dataidx("build", "sft.yaml", "-o", "s.db", "--cutoff", "128", "--truncation", "right", cwd=demo),
            "--cutoff, --truncation are for rendering and need --tokenizer (or run dataidx render after the build)",
            code=2)
    assert not (demo / "s.db").exists()


# Item 5: a build over a store holding more than the build writes.

def test_a_build_over_a_store_with_other_work_is_refused_unless_replace(demo: Path, tiny_tokenizer: Path) -> None:
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0  # the same build: as today
    assert dataidx("mix", "s.db", "sft.yaml", "--name", "seed7", "--seed", "7", cwd=demo).returncode == 0
    assert dataidx("render", "s.db", "--tokenizer", tiny_tokenizer, "--cutoff", "512", "--name", "long", "-q",
                   cwd=demo).returncode == 0
    assert dataidx("pack", "s.db", "--spec", "long", "--capacity", "256", cwd=demo).returncode == 0
    before = (demo / "s.db").read_bytes()
    refused(dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo),
            f"{demo / 's.db'} holds mixture 'seed7', render spec 'long', packing plan 'default', which a build over "
            "it would delete; build into another store, or pass --replace to delete them")
    assert (demo / "s.db").read_bytes() == before
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", "--replace", cwd=demo).returncode == 0
    listed = dataidx("query", "s.db", "SELECT name FROM mixtures", "--csv", cwd=demo).stdout.split()
    assert listed == ["name", "default"]


def test_a_build_that_renders_spec_default_again_may_replace_it(demo: Path, tiny_tokenizer: Path) -> None:
    build = ("build", "sft.yaml", "-o", "s.db", "-q", "--tokenizer", tiny_tokenizer, "--cutoff", "512")
    assert dataidx(*build, cwd=demo).returncode == 0
    assert dataidx(*build, cwd=demo).returncode == 0
    refused(dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo),
            f"{demo / 's.db'} holds render spec 'default', which a build over it would delete; build into another "
            "store, or pass --replace to delete them")


# Item 7: outputs written over the store, its sources, the input, or another kind of file.

def test_outputs_never_overwrite_the_store_its_sources_or_the_input(demo: Path) -> None:
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    source, store = (demo / "chat.jsonl").read_bytes(), (demo / "s.db").read_bytes()
    refused(dataidx("export", "s.db", "-o", "chat.jsonl", cwd=demo),
            "chat.jsonl: refusing to write over it: dataset 'chat' of the store was built from it; "
            "choose another output")
    refused(dataidx("export", "s.db", "-o", "sft.yaml", "--force", cwd=demo),
            "sft.yaml: refusing to write over it: the store was built from it; choose another output")
    assert (demo / "chat.jsonl").read_bytes() == source
    (demo / "notes.jsonl").write_text("# my notes\n")
    refused(dataidx("export", "s.db", "-o", "notes.jsonl", cwd=demo),
            "notes.jsonl exists and is not a JSON lines file; refusing to overwrite it (choose another output, "
            "or pass --force)")
    assert dataidx("export", "s.db", "-o", "notes.jsonl", "-q", "--force", cwd=demo).returncode == 0
    assert dataidx("export", "s.db", "-o", "notes.jsonl", "-q", cwd=demo).returncode == 0  # now an export: replaced
    refused(dataidx("report", "s.db", "-o", "s.db", cwd=demo),
            "s.db: refusing to write over it: it is the store; choose another output")
    assert (demo / "s.db").read_bytes() == store
    refused(dataidx("report", "s.db", "-o", "notes.jsonl", cwd=demo),
            "notes.jsonl exists and is not an HTML file; refusing to overwrite it "
            "(choose another output, or pass --force)")
    assert dataidx("report", "s.db", "-o", "r.html", "-q", cwd=demo).returncode == 0
    assert dataidx("report", "s.db", "-o", "r.html", "-q", cwd=demo).returncode == 0  # a report again: replaced
    (demo / "dataset_info.json").write_text('{"a": {"file_name": "alpaca.jsonl"}}')
    refused(dataidx("import-v0", "dataset_info.json", "-o", "dataset_info.json", cwd=demo),
            "dataset_info.json: refusing to write over it: the command reads it; choose another output")
    assert (demo / "dataset_info.json").read_text() == '{"a": {"file_name": "alpaca.jsonl"}}'
    (demo / "README.md").write_text("# my project\n\nSome text.\n")
    refused(dataidx("import-v0", "dataset_info.json", "-o", "README.md", cwd=demo),
            "README.md exists and is not a YAML file; refusing to overwrite it "
            "(choose another output, or pass --force)")
    assert dataidx("import-v0", "dataset_info.json", "-o", "v1.yaml", cwd=demo).returncode == 0
    assert dataidx("import-v0", "dataset_info.json", "-o", "v1.yaml", cwd=demo).returncode == 0


# Item 1: a wrong or missing converter builds nothing but one line naming the right one.

def test_a_dataset_that_trains_nothing_is_refused_naming_the_converter_its_columns_suggest(demo: Path) -> None:
    write_yaml(demo / "wrong.yaml", "alp:\n  path: alpaca.jsonl\n  source: local\n  converter: sharegpt\n")
    refused(dataidx("build", "wrong.yaml", "-o", "s.db", "-q", cwd=demo),
            "dataset 'alp': 6 of 6 rows have no supervised turn and no preference pair under converter 'sharegpt'; "
            "its columns (instruction, input, output) suggest converter: alpaca; if that is on purpose, "
            "set allow_empty: true (pretraining text is converter: text)")
    write_yaml(demo / "none.yaml", "chat:\n  path: chat.jsonl\n  source: local\n")
    refused(dataidx("build", "none.yaml", "-o", "s.db", "-q", cwd=demo),
            "dataset 'chat': 3 of 3 rows have no supervised turn and no preference pair with no converter; "
            "its columns (conversations) suggest converter: sharegpt; if that is on purpose, "
            "set allow_empty: true (pretraining text is converter: text)")
    assert not (demo / "s.db").exists()


def test_text_allowed_on_purpose_builds_and_empty_rows_are_counted(demo: Path) -> None:
    write_jsonl(demo / "blank.jsonl", [{"text": ""} for _ in range(4)])  # text documents with no text
    write_jsonl(demo / "text.jsonl", [{"text": f"page {i}"} for i in range(3)] + [{"text": ""}])
    write_jsonl(demo / "mostly.jsonl", alpaca_rows(3) + [{"instruction": "no answer", "output": None}])
    write_yaml(demo / "mixed.yaml", "blank:\n  path: blank.jsonl\n  source: local\n")
    refused(dataidx("build", "mixed.yaml", "-o", "s.db", "-q", cwd=demo),
            "dataset 'blank': 4 of 4 rows have no supervised turn and no preference pair with no converter; "
            "its columns are text; if that is on purpose, set allow_empty: true (pretraining text is "
            "converter: text)")
    write_yaml(demo / "mixed.yaml", "blank:\n  path: blank.jsonl\n  source: local\n  allow_empty: true\n"
               "pages:\n  path: text.jsonl\n  source: local\n"
               "mostly:\n  path: mostly.jsonl\n  source: local\n  converter: alpaca\n")
    built = dataidx("build", "mixed.yaml", "-o", "s.db", cwd=demo)
    assert built.returncode == 0, built.stderr
    assert "empty rows" in built.stderr
    info = json.loads(dataidx("info", "s.db", "--json", cwd=demo).stdout)
    assert [(d["name"], d["rows"], d["empty_rows"]) for d in info["datasets"]] == [
        ("blank", 4, 4), ("pages", 4, 1), ("mostly", 4, 1)]


@requires_shared
def test_llamafactorys_preference_and_text_demos_build_as_they_should(tmp_path: Path) -> None:
    """Preference data trains through its pairs; LLaMA-Factory's text demo is pretraining documents."""
    write_yaml(tmp_path / "pair.yaml",
               f"p:\n  path: {SHARED_DATA / 'pair_demo.jsonl'}\n  source: local\n  converter: pair\n"
               f"d:\n  path: {SHARED_DATA / 'v1_dpo_demo.jsonl'}\n  source: local\n")
    assert dataidx("build", "pair.yaml", "-o", "p.db", "-q", cwd=tmp_path).returncode == 0
    write_yaml(tmp_path / "c4.yaml", f"c4:\n  path: {SHARED_DATA / 'c4_demo.jsonl'}\n  source: local\n")
    assert dataidx("build", "c4.yaml", "-o", "c.db", "-q", cwd=tmp_path).returncode == 0
    info = json.loads(dataidx("info", "c.db", "--json", cwd=tmp_path).stdout)
    assert [(d["rows"], d["entries"], d["empty_rows"]) for d in info["datasets"]] == [(300, 300, 0)]


# Item 6: a mixture drawn by tokens under lengths a new render replaced.

def test_budget_mixtures_of_old_lengths_are_refused_after_a_new_render(demo: Path, tiny_tokenizer: Path) -> None:
    write_yaml(demo / "budgets.yaml", "alp:\n  path: alpaca.jsonl\n  source: local\n  converter: alpaca\n  tokens: 40\n"
               "chat:\n  path: chat.jsonl\n  source: local\n  converter: sharegpt\n")
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    assert dataidx("render", "s.db", "--tokenizer", tiny_tokenizer, "--cutoff", "512", "-q", cwd=demo).returncode == 0
    assert dataidx("mix", "s.db", "budgets.yaml", "--name", "bt", "--spec", "default", "--epochs", "2",
                   cwd=demo).returncode == 0
    refused(dataidx("render", "s.db", "--tokenizer", tiny_tokenizer, "--cutoff", "256", cwd=demo),
            "s.db: render spec 'default' is stored rendered another way (cutoff 512 -> 256); mixture 'bt' (drawn by "
            "token budgets) was made from its lengths, which rendering it again replaces: pass --replace (plans and "
            "stored tokens are deleted, token-budget mixtures refused until drawn again), or choose another --name")
    again = dataidx("render", "s.db", "--tokenizer", tiny_tokenizer, "--cutoff", "256", "--replace", cwd=demo)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1] == (
        "note: mixture 'bt' was drawn by token budgets under the old lengths of spec 'default' and are refused until "
        "drawn again: dataidx remove-mixture s.db NAME, then dataidx mix s.db CONFIG --name NAME --spec default")
    why = ("mixture 'bt' was drawn by token budgets under render spec 'default', which was rendered again since, "
           "with other lengths: its budgets count lengths the store no longer holds; draw it again with dataidx "
           "remove-mixture s.db bt, then dataidx mix s.db CONFIG --name bt --spec default")
    for command in (["show", "s.db", "0", "--mixture", "bt"],
                    ["compose", "s.db", "--mixture", "bt", "--spec", "default"],
                    ["export", "s.db", "--mixture", "bt", "-o", "bt.jsonl"],
                    ["pack", "s.db", "--spec", "default", "--mixture", "bt", "--capacity", "64"]):
        refused(dataidx(*command, cwd=demo), f"s.db: {why}")
    info = json.loads(dataidx("info", "s.db", "--json", cwd=demo).stdout)
    assert [m["stale"] for m in info["mixtures"]] == [None, why]
    assert dataidx("remove-mixture", "s.db", "bt", cwd=demo).returncode == 0
    assert dataidx("mix", "s.db", "budgets.yaml", "--name", "bt", "--spec", "default", cwd=demo).returncode == 0
    assert dataidx("compose", "s.db", "--mixture", "bt", "--spec", "default", cwd=demo).returncode == 0


# Item 10: steps, packs and messages per epoch.

def test_steps_and_packs_are_per_epoch_and_messages_name_the_epoch(demo: Path, tiny_tokenizer: Path) -> None:
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    assert dataidx("render", "s.db", "--tokenizer", tiny_tokenizer, "--cutoff", "512", "-q", cwd=demo).returncode == 0
    assert dataidx("mix", "s.db", "sft.yaml", "--name", "three", "--epochs", "3", cwd=demo).returncode == 0
    packed = dataidx("pack", "s.db", "--spec", "default", "--mixture", "three", "--capacity", "64",
                     "--global-batch-size", "2", cwd=demo)
    assert packed.returncode == 0, packed.stderr
    info = json.loads(dataidx("info", "s.db", "--json", cwd=demo).stdout)
    epoch_packs = info["pack_plans"][0]["epoch_packs"]
    assert len(epoch_packs) == 3 and sum(epoch_packs) == info["pack_plans"][0]["packs"]
    lines = packed.stderr.splitlines()
    assert lines[1] == f"packs per epoch: {', '.join(map(str, epoch_packs))}"
    steps = {packs // 2 for packs in epoch_packs}
    assert len(steps) == 1  # the same entries each epoch, shuffled: the same packs
    rests = ", ".join(str(packs % 2) for packs in epoch_packs)
    dropped = (f"; the last packs of each epoch that do not fill a step are dropped (drop_last): {rests}"
               if any(packs % 2 for packs in epoch_packs) else "")
    assert lines[2] == f"{steps.pop()} steps per epoch at a global batch size of 2 packs{dropped}"
    refused(dataidx("show", "s.db", "99", "--mixture", "three", "--epoch", "2", cwd=demo),
            "position 99 out of range for mixture 'three', epoch 2 of 3 of 12 entries")
    shown = dataidx("show", "s.db", "0", "--mixture", "three", "--epoch", "1", cwd=demo)
    assert shown.stderr == "mixture 'three', epoch 1 of 3 (--epoch K for another)\n"
    composed = dataidx("compose", "s.db", "--mixture", "three", cwd=demo)
    assert composed.stderr == "mixture 'three', all 3 epochs (--epoch K for one)\n"
    exported = dataidx("export", "s.db", "--mixture", "three", "--epoch", "2", "-o", "e.jsonl", "-q", cwd=demo)
    assert exported.returncode == 0 and exported.stderr == ""
    exported = dataidx("export", "s.db", "--mixture", "three", "--epoch", "2", "-o", "e.jsonl", cwd=demo)
    assert exported.stderr.splitlines()[-1] == "wrote 12 samples of mixture 'three', epoch 2 of 3 to e.jsonl"
    from dataidx import DataEngine

    with DataEngine(demo / "s.db", "three", epoch=1) as engine, \
            pytest.raises(IndexError,
                          match=r"^position 12 out of range for mixture 'three', epoch 1 of 3 of 12 entries$"):
        engine[12]


# Item 13: the README's walkthrough, as written, ends with steps to train.

WALKTHROUGH = [
    "dataidx build data/demo_sft.yaml -o demo.db",
    "dataidx render demo.db --tokenizer data/demo_tokenizer --cutoff 512",
    "dataidx pack demo.db --spec default --capacity 1024 --global-batch-size 2",
    "dataidx mix demo.db data/demo_budgets.yaml --name by_tokens --spec default --epochs 3",
    "dataidx report demo.db -o report.html --spec default --plan default",
    "dataidx report demo.db -o by_tokens.html --mixture by_tokens --spec default",
]


def test_the_readme_walkthrough_ends_with_steps_to_train(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    shutil.copytree(REPO / "data", tmp_path / "data")
    said = {}
    for command in WALKTHROUGH:
        assert command in readme, command
        result = dataidx_process(*command.split()[1:], cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr)
        said[command.split()[1]] = result.stderr
    assert "3 steps per epoch at a global batch size of 2 packs" in said["pack"]
    assert "in 6 packs of 1024 tokens, 87.94% full" in said["pack"]
    assert "every one of the 28 entries renders `ok` under 512 tokens" in readme
    assert "(28 train)" in said["render"]
    assert "3 steps per epoch at 2 packs a\nstep" in readme or "3 steps per epoch at 2 packs a step" in readme
    assert (tmp_path / "by_tokens.html").stat().st_size > 10_000

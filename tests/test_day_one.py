"""What a newcomer hits in the first hour (issue 23): each test is one mistake, made through the
real CLI in a subprocess, and holds dataidx to the exact one line and exit code it answers with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import alpaca_rows, chat_rows, write_jsonl, write_yaml

REPO = Path(__file__).resolve().parents[1]


def dataidx(*args: object, cwd: Path) -> subprocess.CompletedProcess:
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

def test_item4_a_tokenizer_that_is_not_one_is_one_line(demo: Path) -> None:
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


def test_item4_render_options_without_a_tokenizer_are_a_usage_error(demo: Path) -> None:
    refused(dataidx("build", "sft.yaml", "-o", "s.db", "--cutoff", "128", "--truncation", "right", cwd=demo),
            "--cutoff, --truncation are for rendering and need --tokenizer (or run dataidx render after the build)",
            code=2)
    assert not (demo / "s.db").exists()


# Item 5: a build over a store holding more than the build writes.

def test_item5_a_build_over_a_store_with_other_work_is_refused_unless_replace(demo: Path, tiny_tokenizer: Path) -> None:
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


def test_item5_a_build_that_renders_spec_default_again_may_replace_it(demo: Path, tiny_tokenizer: Path) -> None:
    build = ("build", "sft.yaml", "-o", "s.db", "-q", "--tokenizer", tiny_tokenizer, "--cutoff", "512")
    assert dataidx(*build, cwd=demo).returncode == 0
    assert dataidx(*build, cwd=demo).returncode == 0
    refused(dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo),
            f"{demo / 's.db'} holds render spec 'default', which a build over it would delete; build into another "
            "store, or pass --replace to delete them")


# Item 7: outputs written over the store, its sources, the input, or another kind of file.

def test_item7_outputs_never_overwrite_the_store_its_sources_or_the_input(demo: Path) -> None:
    assert dataidx("build", "sft.yaml", "-o", "s.db", "-q", cwd=demo).returncode == 0
    source = (demo / "chat.jsonl").read_bytes()
    refused(dataidx("export", "s.db", "-o", "chat.jsonl", cwd=demo),
            "chat.jsonl: refusing to write over it: dataset 'chat' of the store was built from it; choose another output")
    refused(dataidx("export", "s.db", "-o", "sft.yaml", "--force", cwd=demo),
            "sft.yaml: refusing to write over it: the store was built from it; choose another output")
    assert (demo / "chat.jsonl").read_bytes() == source
    (demo / "notes.jsonl").write_text("# my notes\n")
    refused(dataidx("export", "s.db", "-o", "notes.jsonl", cwd=demo),
            "notes.jsonl exists and is not a JSON lines file; refusing to overwrite it (choose another output, "
            "or pass --force)")
    assert dataidx("export", "s.db", "-o", "notes.jsonl", "-q", "--force", cwd=demo).returncode == 0
    assert dataidx("export", "s.db", "-o", "notes.jsonl", "-q", cwd=demo).returncode == 0  # now an export: replaced
    (demo / "dataset_info.json").write_text('{"a": {"file_name": "alpaca.jsonl"}}')
    refused(dataidx("import-v0", "dataset_info.json", "-o", "dataset_info.json", cwd=demo),
            "dataset_info.json: refusing to write over it: the command reads it; choose another output")
    (demo / "README.md").write_text("# my project\n\nSome text.\n")
    refused(dataidx("import-v0", "dataset_info.json", "-o", "README.md", cwd=demo),
            "README.md exists and is not a YAML file; refusing to overwrite it (choose another output, or pass --force)")
    assert dataidx("import-v0", "dataset_info.json", "-o", "v1.yaml", cwd=demo).returncode == 0
    assert dataidx("import-v0", "dataset_info.json", "-o", "v1.yaml", cwd=demo).returncode == 0

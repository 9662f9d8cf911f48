"""Config validation: v1 YAML unchanged, every problem reported at once with dataset and key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.config import load_config
from dataidx.convert import converters
from dataidx.errors import ConfigError
from dataidx.spec import VALID_KEYS

from .helpers import write_yaml


def test_v1_keys_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(write_yaml(tmp_path / "c.yaml", """
a:
  path: data/a.json
  source: local
  converter: alpaca
  size: 10
  weight: 0.5
  split: train
  streaming: false
b:
  path: org/dataset
"""))
    a, b = config.datasets
    assert (a.name, a.path, a.source, a.converter, a.size, a.weight) == (
        "a", str(tmp_path / "data" / "a.json"), "local", "alpaca", 10, 0.5)
    assert (b.path, b.source, b.split, b.converter, b.size, b.weight) == (
        "org/dataset", "hf_hub", "train", None, None, None)
    assert config.text.startswith("\na:")
    assert len(config.sha256) == 64


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "bad.yaml", """
one:
  path: x.json
  source: local
  sise: 3
two:
  source: local
  converter: alpacca
three:
  path: y.json
  source: ftp
  size: -1
  weight: heavy
  streaming: "yes"
""")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = caught.value.problems
    assert problems == [
        f"dataset 'one': unknown key 'sise' (valid: {', '.join(VALID_KEYS)})",
        "dataset 'two': missing required key 'path'",
        f"dataset 'two': key 'converter': unknown converter 'alpacca' (known: {', '.join(converters.names())})",
        "dataset 'three': key 'source': unknown source 'ftp' (known: hf_hub, local); register a loader with "
        "@dataidx.register_source in a module passed to dataidx --plugins, or installed under the entry point "
        "group dataidx.plugins",
        "dataset 'three': key 'size' must be an integer >= 0, got -1",
        "dataset 'three': key 'weight' must be a finite number >= 0, got 'heavy'",
        "dataset 'three': key 'streaming' must be true or false, got 'yes'",
    ]
    assert {"alpaca", "none", "pair", "sharegpt"} <= set(converters.names())
    message = str(caught.value)
    assert message.startswith(f"{path}: 7 problems: dataset 'one'")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n- b\n", "expected a mapping of dataset name"),
        ("a: [1, 2]\n", "dataset 'a': expected a mapping of keys"),
        ("a: {path: [x]}\n", "dataset 'a': key 'path' must be a non-empty string"),
        ("a: {path: x, size: true}\n", "dataset 'a': key 'size' must be an integer >= 0, got True"),
        ("a: {path: x\n", "not valid YAML"),
        ("", "expected a mapping of dataset name"),
        ("a:\n  path: x\n  weight: .inf\n", "key 'weight' must be a finite number >= 0, got inf"),
        ("a:\n  path: x\n  weight: .nan\n", "key 'weight' must be a finite number >= 0, got nan"),
        ("1:\n  path: x\n'1':\n  path: y\n", "dataset '1': the name appears more than once"),
    ],
)
def test_malformed_configs(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_config(write_yaml(tmp_path / "c.yaml", text))


def test_missing_yaml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")


def test_bare_file_or_folder_is_one_local_dataset_named_default(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    (spec,) = load_config(data).datasets
    assert (spec.name, spec.path, spec.source) == ("default", str(data), "local")
    (spec,) = load_config(tmp_path).datasets
    assert (spec.name, spec.source) == ("default", "local")
    (spec,) = load_config("some-org/some-dataset").datasets
    assert (spec.name, spec.path, spec.source) == ("default", "some-org/some-dataset", "hf_hub")
    assert not os.path.isabs(spec.path)


def test_a_yaml_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a:\n  path: \xff\xfe\n")
    result = CliRunner().invoke(cli, ["build", str(path), "-o", str(tmp_path / "s.db")])
    assert result.exit_code == 1 and "not UTF-8 text" in result.stderr and "Traceback" not in result.stderr


# Issue 50, item 16: a large honest YAML loads; aliases are measured against what the text writes.

@pytest.mark.slow
def test_a_large_honest_yaml_loads_rather_than_being_called_an_alias_bomb(tmp_path: Path) -> None:
    datasets = "".join(f"part_{i}:\n  path: data/part_{i}.jsonl\n  source: local\n" for i in range(25_000))
    config = load_config(write_yaml(tmp_path / "big.yaml", datasets))  # 125,001 values, no alias
    assert len(config.datasets) == 25_000 and config.datasets[-1].name == "part_24999"


@pytest.mark.slow
def test_a_large_yaml_that_shares_settings_through_merge_keys_loads(tmp_path: Path) -> None:
    shared = "part_0: &shared\n  path: data/part_0.jsonl\n  source: local\n  converter: alpaca\n  split: train\n"
    datasets = "".join(f"part_{i}:\n  <<: *shared\n  path: data/part_{i}.jsonl\n" for i in range(1, 20_000))
    config = load_config(write_yaml(tmp_path / "merged.yaml", shared + datasets))  # aliases: 3 times the text
    assert len(config.datasets) == 20_000
    assert (config.datasets[-1].path, config.datasets[-1].converter) == (
        os.path.abspath("data/part_19999.jsonl"), "alpaca")  # its own path over the shared one


@pytest.mark.parametrize(("text", "problem"), [
    ("a: &a\n  path: *a\n", "line 2: alias *a stands for a value it is inside; a config cannot hold itself"),
    ("a: &a [1, *a]\n", "line 1: alias *a stands for a value it is inside; a config cannot hold itself"),
    ("deep: &d " + "[" * 40 + "]" * 40 + "\na:\n  path: x\n  size: " + "[" * 30 + "*d" + "]" * 30 + "\n",
     "line 4: nested deeper than 64 levels once its aliases are expanded"),
])
def test_an_alias_that_holds_itself_or_nests_too_deep_is_one_line(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(write_yaml(tmp_path / "c.yaml", text))
    assert str(refused.value) == f"{tmp_path / 'c.yaml'}: 1 problem: {problem}"

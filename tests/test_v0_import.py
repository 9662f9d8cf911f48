"""Importing a LLaMA-Factory v0 dataset_info.json into a v1 YAML that builds."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.config import import_dataset_info

from .helpers import SHARED_DATA, engine_samples, requires_shared

#: Entries as LLaMA-Factory's data/dataset_info.json has them for its demo files, plus shapes v1 lacks.
DATASET_INFO = {
    "alpaca_en_demo": {"file_name": "alpaca_en_demo.json"},
    "glaive_toolcall_en_demo": {"file_name": "glaive_toolcall_en_demo.json", "formatting": "sharegpt",
                                "columns": {"messages": "conversations", "tools": "tools"}},
    "mllm_demo": {"file_name": "mllm_demo.json", "formatting": "sharegpt",
                  "columns": {"messages": "messages", "images": "images"},
                  "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                           "assistant_tag": "assistant"}},
    "identity": {"file_name": "identity.json", "num_samples": 5},
    "c4_demo": {"file_name": "c4_demo.jsonl", "columns": {"prompt": "text"}},
    "dpo_en_demo": {"file_name": "dpo_en_demo.json", "ranking": True, "formatting": "sharegpt",
                    "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}},
    "kto_en_demo": {"file_name": "kto_en_demo.json", "formatting": "sharegpt",
                    "columns": {"messages": "messages", "kto_tag": "label"},
                    "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                             "assistant_tag": "assistant"}},
    "kto_from_value": {"file_name": "kto.json", "formatting": "sharegpt",
                       "columns": {"messages": "conversations", "kto_tag": "tag"}},
    "belle_multiturn": {"script_url": "belle_multiturn", "formatting": "sharegpt"},
    "hub_qa": {"hf_hub_url": "someone/qa", "split": "validation", "columns": {"prompt": "q", "response": "a"}},
    "odd_tags": {"file_name": "x.json", "formatting": "sharegpt", "tags": {"user_tag": "person"}},
}


def test_v0_entries_become_v1_entries_or_are_named_as_left_out(tmp_path: Path) -> None:
    info = tmp_path / "dataset_info.json"
    info.write_text(json.dumps(DATASET_INFO))
    imported = import_dataset_info(info, dataset_dir="/data")
    assert imported.datasets["alpaca_en_demo"] == {"path": "/data/alpaca_en_demo.json", "source": "local",
                                                   "converter": "alpaca"}
    assert imported.datasets["glaive_toolcall_en_demo"]["converter"] == "sharegpt"
    assert "columns" not in imported.datasets["glaive_toolcall_en_demo"]
    assert imported.datasets["mllm_demo"]["converter"] == "openai"
    assert imported.datasets["identity"]["size"] == 5
    assert imported.datasets["c4_demo"]["columns"] == {"instruction": "text"}
    assert imported.datasets["hub_qa"] == {"path": "someone/qa", "source": "hf_hub", "converter": "alpaca",
                                           "columns": {"instruction": "q", "output": "a"}, "split": "validation"}
    # LLaMA-Factory's kto_en_demo takes the kto converter; KTO data in from/value tags is left out.
    assert imported.datasets["kto_en_demo"] == {"path": "/data/kto_en_demo.json", "source": "local",
                                                "converter": "kto"}
    assert set(imported.left_out) == {"dpo_en_demo", "kto_from_value", "belle_multiturn", "odd_tags"}
    assert "ranking" in imported.left_out["dpo_en_demo"] and "user_tag" in imported.left_out["odd_tags"]
    text = imported.yaml_text("dataset_info.json")
    assert "#   kto_from_value: KTO data (kto_tag) in a shape converter kto does not take" in text
    assert yaml.safe_load(text) == imported.datasets


@requires_shared
def test_the_imported_yaml_builds_the_demo_files(tmp_path: Path) -> None:
    info = tmp_path / "dataset_info.json"
    info.write_text(json.dumps({k: DATASET_INFO[k] for k in ("alpaca_en_demo", "glaive_toolcall_en_demo",
                                                             "mllm_demo", "identity", "dpo_en_demo", "kto_en_demo")}))
    runner = CliRunner()
    result = runner.invoke(cli, ["import-v0", str(info), "--dataset-dir", str(SHARED_DATA),
                                 "-o", str(tmp_path / "v1.yaml")])
    assert result.exit_code == 0, result.output
    assert "left out 'dpo_en_demo': ranking" in result.stderr and "wrote 5 datasets" in result.stderr
    result = runner.invoke(cli, ["build", str(tmp_path / "v1.yaml"), "-o", str(tmp_path / "v1.db"), "-q"])
    assert result.exit_code == 0, result.output
    direct = tmp_path / "direct.yaml"
    direct.write_text(f"alpaca_en_demo:\n  path: {SHARED_DATA / 'alpaca_en_demo.json'}\n  source: local\n"
                      "  converter: alpaca\n")
    runner.invoke(cli, ["build", str(direct), "-o", str(tmp_path / "direct.db"), "-q"])
    imported, reference = engine_samples(tmp_path / "v1.db"), engine_samples(tmp_path / "direct.db")
    assert imported[0:len(reference)] == reference
    names = {sample["_dataset_name"] for sample in imported}
    assert names == {"alpaca_en_demo", "glaive_toolcall_en_demo", "mllm_demo", "identity", "kto_en_demo"}
    kto = [sample for sample in imported if sample["_dataset_name"] == "kto_en_demo"]
    assert len(kto) == 300 and {sample["extra_info"] for sample in kto} == {'{"kto_label": true}',
                                                                             '{"kto_label": false}'}


def test_v0_shapes_v1_would_misread_are_left_out(tmp_path: Path) -> None:
    info = tmp_path / "dataset_info.json"
    info.write_text(json.dumps({
        "sys": {"file_name": "x.json", "formatting": "sharegpt",
                "columns": {"messages": "conversations", "system": "s"}},
        "ms": {"ms_hub_url": "someone/qa"},
    }))
    left_out = import_dataset_info(info).left_out
    assert "system" in left_out["sys"] and "ms_hub" in left_out["ms"]

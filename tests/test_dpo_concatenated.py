"""``Collator(pairs="concatenated")`` over ``v1_dpo_demo`` equals LLaMA-Factory v1's DPO model input
(ff6d4d12): ``Renderer.process_samples`` (core/rendering/rendering.py), which lays a pair out as
chosen then rejected with ``token_type_ids`` 1 and 2, padded by ``pad_and_truncate``
(core/utils/collation.py). With DATAIDX_LLAMAFACTORY naming v1's src, v1 itself runs here on the
golden samples; else the batch is transcribed from v1's rendered goldens by those two functions.

v1 stores ``position_ids`` from 1 on each side; its DPO and RM trainers feed the model ``0..`` per
side (``DPOTrainer._prepare_model_inputs``: ``arange`` less the chosen side's length on rejected
tokens), which is what the Collator gives: v1's minus 1 on every token, 0 on padding."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from dataidx import Collator, DataEngine
from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import IGNORE
from dataidx.store import run_query

from .helpers import GOLDEN, golden_config, read_jsonl, requires_shared

pytestmark = [requires_shared, pytest.mark.slow]  # v1's goldens (or v1 itself) on a rendered store

RENDERED = GOLDEN / "render"
TOKENIZERS = ("chatml", "llama3")
NAME = "v1_dpo_demo"
#: What v1's padded DPO batch holds, each padded as ``pad_and_truncate`` pads it (labels with -100, the rest 0).
V1_KEYS = ("input_ids", "attention_mask", "labels", "loss_weights", "token_type_ids", "position_ids")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1_dpo_demo built as v1 loads it, rendered with both golden tokenizers, on fetch and from stored tokens."""
    folder = tmp_path_factory.mktemp("dpo-concatenated")
    (folder / "config.yaml").write_text(golden_config([NAME]))
    build(folder / "config.yaml", folder / "dpo.db")
    for tokenizer in TOKENIZERS:
        for spec, extra in ((tokenizer, []), (f"{tokenizer}-tokens", ["--store-tokens"])):
            result = CliRunner().invoke(cli, ["render", str(folder / "dpo.db"), "--tokenizer",
                                              str(RENDERED / tokenizer / "tokenizer"), "--cutoff", "100000",
                                              "--name", spec, "-q", *extra])
            assert result.exit_code == 0, result.output
    return folder / "dpo.db"


def v1_from_source(source: Path, tokenizer: str) -> dict[str, list]:
    """v1's own ``process_samples`` then ``pad_and_truncate`` over the golden samples, in their order."""
    from transformers import AutoTokenizer

    from .conformance.v1 import frozen_clock, v1_renderer_class

    renderer = v1_renderer_class(source)(AutoTokenizer.from_pretrained(str(RENDERED / tokenizer / "tokenizer")))
    from llamafactory.v1.core.utils.collation import pad_and_truncate  # type: ignore[import-not-found]

    samples = read_jsonl(GOLDEN / f"{NAME}.samples.jsonl")
    with frozen_clock():
        made = renderer.process_samples([samples[row] for row, _ in read_jsonl(GOLDEN / f"{NAME}.index.jsonl")])
    padded = pad_and_truncate(made, 10**9)
    return {key: torch.stack([row[key] for row in padded]).tolist() for key in V1_KEYS}


def v1_from_goldens(tokenizer: str) -> dict[str, list]:
    """The same batch transcribed from v1's rendered goldens: ``process_samples`` adds an attention
    mask of ones and positions ``1..`` per side; ``pad_and_truncate`` pads labels with -100, the rest with 0."""
    lines = read_jsonl(RENDERED / tokenizer / f"{NAME}.jsonl")
    width = max(len(line["input_ids"]) for line in lines)
    out: dict[str, list] = {key: [] for key in V1_KEYS}
    for line in lines:
        chosen = line["token_type_ids"].count(1)
        line = {**line, "attention_mask": [1] * len(line["input_ids"]),
                "position_ids": [*range(1, chosen + 1), *range(1, len(line["input_ids"]) - chosen + 1)]}
        for key in V1_KEYS:
            out[key].append(line[key] + [IGNORE if key == "labels" else 0] * (width - len(line[key])))
    out["loss_weights"] = torch.tensor(out["loss_weights"], dtype=torch.float32).tolist()
    return out


def v1_batch(tokenizer: str) -> dict[str, list]:
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):
        return v1_from_source(Path(source), tokenizer)
    return v1_from_goldens(tokenizer)


def served_batch(store: Path, spec: str) -> dict[str, Any]:
    """``Collator(pairs="concatenated")`` over the store's pairs, in the goldens' row order."""
    _, rows = run_query(store, "SELECT row, position FROM entries WHERE mixture = 'default'")
    positions = dict(rows)
    order = [row for row, _ in read_jsonl(GOLDEN / f"{NAME}.index.jsonl")]
    with DataEngine(store, render=spec) as engine:
        assert len(engine) == len(order) == 10  # every pair trains: engine index = position
        pairs = [engine[positions[row]] for row in order]
    batch = Collator(pad_token_id=0, pairs="concatenated")(pairs)  # v1 pads ids with 0
    return {key: value.tolist() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


@pytest.mark.parametrize("spec", [f"{t}{s}" for t in TOKENIZERS for s in ("", "-tokens")])
def test_concatenated_pairs_are_v1s_dpo_model_input(store: Path, spec: str) -> None:
    ours, v1 = served_batch(store, spec), v1_batch(spec.removesuffix("-tokens"))
    for key in ("input_ids", "attention_mask", "labels", "loss_weights", "token_type_ids"):
        assert ours[key] == v1[key], key
    # v1's positions from 1, the model's from 0 (its trainers recompute them): one less on every token.
    assert ours["position_ids"] == [[max(p - 1, 0) for p in row] for row in v1["position_ids"]]
    assert all(types.count(1) and types.count(2) for types in v1["token_type_ids"])  # both sides, every row
    assert ours["sample_ids"] == ours["token_type_ids"]

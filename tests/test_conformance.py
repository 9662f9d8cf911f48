"""Conformance with LLaMA-Factory v1's own Renderer on the real chat templates of model families:
every entry of the hand-written conversations (and of LLaMA-Factory's demo data, when
../shared/data/golden is beside the repo) rendered through ``dataidx render`` and read back gets
the ids, labels and loss weights v1 made, or is refused where v1 refused it. The goldens are
v1's (``scripts/conformance.py``); set DATAIDX_LLAMAFACTORY to LLaMA-Factory's src (ff6d4d12) to
hold dataidx to v1 itself, run here, instead."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import render_positions
from dataidx.store import run_query

from .conformance import GOLDEN, build_tokenizer, digest, families
from .conformance.conversations import conversations
from .conformance.v1 import CLOCK, entries, outcome, v1_render, v1_renderer_class
from .helpers import GOLDEN as SHARED_GOLDEN
from .helpers import golden_config, write_jsonl

pytestmark = pytest.mark.slow  # the real chat templates of 12 model families

pytest.importorskip("transformers")

V1 = json.loads((GOLDEN / "v1.json").read_text(encoding="utf-8"))
SLUGS = [family["slug"] for family in families()]
#: v1's refusal when the prompt's ids are not a prefix of the whole's: characters decide in dataidx
#: (README, "Labels"), where the text allows it.
NOT_A_TOKEN_PREFIX = "prompt is not a token-prefix"
SHARED = SHARED_GOLDEN.is_dir()


def v1_layout(rendered) -> tuple[list[int], list[int], list[float]]:
    """ids, labels and weights as v1 lays them out: a preference pair is chosen then rejected."""
    sides = rendered.sides.values() if rendered.sides is not None else [rendered]
    ids, labels, weights = [], [], []
    for side in sides:
        ids += side.input_ids
        labels += side.labels
        weights += side.loss_weights
    return ids, labels, weights


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store of every entry the goldens cover (the demo data's only when ../shared is there)."""
    folder = tmp_path_factory.mktemp("conformance")
    config = f"handmade:\n  path: {write_jsonl(folder / 'handmade.jsonl', conversations())}\n  source: local\n"
    if SHARED:
        config += golden_config(sorted({name for name, _, _ in V1["keys"]} - {"handmade"}))
    (folder / "config.yaml").write_text(config)
    build(folder / "config.yaml", folder / "families.db")
    return folder / "families.db"


def golden_outcomes(slug: str, tokenizer: Path) -> dict[tuple[str, int, int | None], str | list[str]]:
    """Each entry's v1 outcome, a digest or ``[refusal]``: v1's own, run here, when
    DATAIDX_LLAMAFACTORY names its source; else the goldens it made."""
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):
        from transformers import AutoTokenizer  # here: only this mode runs v1

        renderer, refusals = v1_renderer_class(Path(source))(AutoTokenizer.from_pretrained(tokenizer)), []
        made = entries(SHARED_GOLDEN if SHARED else None)
        outcomes = [outcome(v1_render(renderer, sample), refusals) for *_, sample in made]
        keys, refusals_of = [key[:3] for key in made], refusals
    else:
        keys, outcomes, refusals_of = V1["keys"], V1["families"][slug], V1["refusals"]
    return {tuple(key): [refusals_of[o]] if isinstance(o, int) else o for key, o in zip(keys, outcomes)}


@pytest.mark.parametrize("slug", SLUGS)
def test_a_family_renders_as_v1_renders_it(store: Path, tmp_path: Path, slug: str) -> None:
    tokenizer = build_tokenizer(slug, tmp_path / slug)
    result = CliRunner().invoke(cli, ["render", str(store), "--tokenizer", str(tokenizer), "--name", slug,
                                      "--cutoff", "100000", "--clock", CLOCK, "-q"])
    assert result.exit_code == 0, result.output
    _, positions = run_query(store, "SELECT position FROM entries WHERE mixture = 'default' ORDER BY position")
    _, rendered = render_positions(store, "default", slug, [position for (position,) in positions])
    _, stored = run_query(store, "SELECT d.name, b.row, b.cut, r.status FROM entry_renders AS r "
                                 "JOIN base_entries AS b ON b.id = r.entry_id "
                                 "JOIN datasets AS d ON d.id = b.dataset_id "
                                 f"JOIN render_specs AS s ON s.id = r.spec_id WHERE s.name = '{slug}'")
    statuses = {(name, row, cut): status for name, row, cut, status in stored}
    golden = golden_outcomes(slug, tokenizer)
    assert {(name, row, cut) for name, row, cut, _ in rendered} == \
        {key for key in golden if SHARED or key[0] == "handmade"}
    outcome = Counter()
    for name, row, cut, one in rendered:
        key, expected = (name, row, cut), golden[(name, row, cut)]
        assert statuses[key] == one.status, (key, one.detail)  # the stored status is the served one's
        if isinstance(expected, str):  # v1 made it: the same ids, labels and weights
            assert one.status in ("ok", "no_supervision"), (key, one.detail)
            assert digest(*v1_layout(one)) == expected, key
            outcome["equal"] += 1
        elif NOT_A_TOKEN_PREFIX in expected[0] and one.status == "ok":
            outcome["characters decide"] += 1
        else:  # v1 refused it: so does dataidx
            assert one.status == "render_error", (key, expected[0], one.status)
            outcome["refused"] += 1
    assert outcome["equal"] > 0

"""A tokenizer with no chat template renders through LLaMA-Factory v1's fallback ChatML
(``_FALLBACK_CHATML_JINJA``, ``core/rendering/format.py`` at ff6d4d12, which v1's Renderer sets in
``rendering.py``'s ``_render_messages``), token for token as v1's Renderer renders it; a malformed
template is still refused. The equality is with v1 itself, run from its source, when
DATAIDX_LLAMAFACTORY names it; else with :data:`V1_FALLBACK`, what v1 made (see its comment)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.index import build
from dataidx.render import BUILTIN_TEMPLATES, load_tokenizer, render_positions
from dataidx.render.spec import make_spec
from dataidx.render.templates import FALLBACK
from dataidx.store import run_query

from .conformance import build_tokenizer, digest
from .conformance.conversations import conversations
from .conformance.v1 import entries, outcome, v1_render, v1_renderer_class
from .helpers import alpaca_rows, one_line_error, train_tokenizer, write_jsonl

pytest.importorskip("transformers")

#: v1's outcomes for every hand-written conversation entry (tests/conformance/v1.py ``entries``),
#: each a digest of ids, labels and weights or ``refused``, hashed as one by
#: :func:`_outcomes_digest`: made by v1's ``Renderer.process_samples`` from its source (ff6d4d12)
#: on the family's tokenizer with its chat template taken away, as :func:`_v1_outcomes` does.
V1_FALLBACK = {"gemma2": "dacd45a1de0a12b5", "qwen2_5": "282cd2a6d5ca6fd4"}
#: sha256 (16 hex digits) of v1's ``_FALLBACK_CHATML_JINJA`` at ff6d4d12.
V1_FALLBACK_TEXT = "83c3b270e8c8f202"


def test_the_fallback_is_v1s_text() -> None:
    assert hashlib.sha256(FALLBACK.encode()).hexdigest()[:16] == V1_FALLBACK_TEXT
    if source := os.environ.get("DATAIDX_LLAMAFACTORY"):
        module = ast.parse((Path(source) / "llamafactory/v1/core/rendering/format.py").read_text(encoding="utf-8"))
        found = [ast.literal_eval(node.value) for node in module.body if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", None) == "_FALLBACK_CHATML_JINJA"]
        assert found == [FALLBACK]


def test_a_tokenizer_without_a_template_gets_the_fallback_and_its_own_fingerprint(tmp_path: Path) -> None:
    folder = tmp_path / "bare"
    train_tokenizer(folder)
    tokenizer = load_tokenizer(folder)
    assert not tokenizer.chat_template
    fallback, _ = make_spec("a", tokenizer, tokenizer_path=folder, template=None, cutoff=64, truncation="drop")
    named, _ = make_spec("b", tokenizer, tokenizer_path=folder, template="fallback", cutoff=64, truncation="drop")
    chatml, _ = make_spec("c", tokenizer, tokenizer_path=folder, template="chatml", cutoff=64, truncation="drop")
    assert (fallback.template, fallback.template_text) == ("fallback", FALLBACK)
    assert named.fingerprint == fallback.fingerprint != chatml.fingerprint
    assert BUILTIN_TEMPLATES["fallback"] == FALLBACK != BUILTIN_TEMPLATES["chatml"]


def test_a_malformed_template_is_still_refused(tmp_path: Path, make_store) -> None:
    folder = tmp_path / "broken"
    train_tokenizer(folder, chat_template="{% for m in messages %}{{ m.content }")
    store = make_store(f"qa:\n  path: {write_jsonl(tmp_path / 'qa.jsonl', alpaca_rows(3))}\n  source: local\n"
                       "  converter: alpaca\n")
    result = CliRunner().invoke(cli, ["render", str(store), "--tokenizer", str(folder), "--cutoff", "64"])
    one_line_error(result, "chat template does not compile: unexpected '}'")
    assert run_query(store, "SELECT count(*) FROM render_specs")[1] == [(0,)]


def _outcomes_digest(outcomes: list[str | int]) -> str:
    return hashlib.sha256(json.dumps(outcomes).encode()).hexdigest()[:16]


def _without_template(slug: str, folder: Path) -> Path:
    """Family ``slug``'s tokenizer folder (its vocabulary and control tokens) with no chat template."""
    build_tokenizer(slug, folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return folder


def _v1_outcomes(tokenizer: Path) -> list[str]:
    """What v1's Renderer, run from the source DATAIDX_LLAMAFACTORY names, makes of each entry."""
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tokenizer)
    assert not loaded.chat_template
    renderer = v1_renderer_class(Path(os.environ["DATAIDX_LLAMAFACTORY"]))(loaded)
    return [_shown(outcome(v1_render(renderer, sample), [])) for *_, sample in entries(None)]


def _shown(one: str | int) -> str:
    """A digest, or ``refused`` for any refusal (v1's words and dataidx's differ)."""
    return one if isinstance(one, str) else "refused"


@pytest.mark.slow  # a store, a tokenizer and a render
@pytest.mark.parametrize("slug", sorted(V1_FALLBACK))
def test_a_tokenizer_without_a_template_renders_as_v1s_fallback(tmp_path: Path, slug: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"handmade:\n  path: {write_jsonl(tmp_path / 'handmade.jsonl', conversations())}\n"
                      "  source: local\n")
    build(config, tmp_path / "store.db")
    tokenizer = _without_template(slug, tmp_path / slug)
    result = CliRunner().invoke(cli, ["render", str(tmp_path / "store.db"), "--tokenizer", str(tokenizer),
                                      "--cutoff", "100000", "-q"])
    assert result.exit_code == 0, result.output
    assert run_query(tmp_path / "store.db", "SELECT template, template_text FROM render_specs")[1] == \
        [("fallback", FALLBACK)]
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "store.db")])
    assert info.exit_code == 0 and "fallback" in info.output, info.output
    _, positions = run_query(tmp_path / "store.db", "SELECT position FROM entries ORDER BY position")
    _, rendered = render_positions(tmp_path / "store.db", "default", "default", [p for (p,) in positions])
    found = {(name, row, cut): one for name, row, cut, one in rendered}
    ours = [_shown(digest(one.input_ids, one.labels, one.loss_weights) if one.status != "render_error" else 0)
            for one in (found[(name, row, cut)] for name, row, cut, _ in entries(None))]
    if os.environ.get("DATAIDX_LLAMAFACTORY"):
        assert ours == _v1_outcomes(tokenizer)
    else:
        assert _outcomes_digest(ours) == V1_FALLBACK[slug], "set DATAIDX_LLAMAFACTORY to see which entry differs"

"""The fast engines (``render/engines.py``): minijinja for the chat text, gigatoken for the ids,
each used by a spec only where it gives the exact engines' output on the store's own entries, and
recorded there; ``verify --tokens`` then checks every stored entry against the exact engines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.read import EntryReader
from dataidx.render import EXACT, Engines, Renderer, read_spec, render_store
from dataidx.store import run_query

from .conformance import build_tokenizer, template_text

pytestmark = pytest.mark.slow  # real families' templates, rendered three ways

FAST = Engines("minijinja", "gigatoken")


def _cli(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3", tmp_path_factory.mktemp("qwen3"))


def _lengths(store: Path, spec: str) -> list[tuple]:
    return run_query(store, "SELECT r.entry_id, r.tokens, r.supervised_tokens, r.full_tokens, r.status, r.detail "
                     "FROM entry_renders AS r JOIN render_specs AS s ON s.id = r.spec_id "
                     f"WHERE s.name = '{spec}' ORDER BY r.entry_id")[1]


def test_fast_engines_render_what_the_exact_ones_do_and_are_recorded(demo_copy: Path, qwen3: Path) -> None:
    """The demo store under Qwen3's own template: the fast spec's lengths, statuses and stored
    tokens equal the exact spec's, the spec says which engines made it, and verify --tokens (exact
    engines, every entry) finds nothing."""
    code, said = _cli("render", demo_copy, "--tokenizer", qwen3, "--cutoff", 1024, "--name", "fast",
                      "--template-engine", "minijinja", "--tokenizer-engine", "gigatoken", "--store-tokens")
    assert code == 0, said
    assert "chat text by minijinja, tokens by gigatoken, proven on" in said
    exact = render_store(demo_copy, qwen3, cutoff=1024, name="exact", store_tokens=True)
    assert exact.proof.entries == 0 and exact.proof.engines == EXACT
    assert _lengths(demo_copy, "fast") == _lengths(demo_copy, "exact")
    with EntryReader(demo_copy) as reader:
        fast_spec, exact_spec = read_spec(reader.handle, "fast"), read_spec(reader.handle, "exact")
    assert fast_spec.engines == FAST and exact_spec.engines == EXACT
    assert fast_spec.fingerprint != exact_spec.fingerprint  # the engines are part of what a spec is
    fast_spec.check()
    assert run_query(demo_copy, "SELECT name, template_engine, tokenizer_engine FROM render_specs ORDER BY id")[1] \
        == [("fast", "minijinja", "gigatoken"), ("exact", "jinja2", "hf")]
    code, said = _cli("verify", demo_copy, "--tokens", "--spec", "fast", "--all", "--json")
    assert code == 0, said
    report = json.loads(said)
    assert report["ok"] and report["specs"][0]["checked"] == report["specs"][0]["entries"] > 20
    code, said = _cli("render", demo_copy, "--tokenizer", qwen3, "--cutoff", 1024, "--name", "fast",
                      "--template-engine", "minijinja", "--tokenizer-engine", "gigatoken")
    assert code == 0 and "is up to date" in said  # proven again, the same engines: nothing to redo
    code, said = _cli("info", demo_copy)
    assert "spec 'fast': chat text by minijinja, tokens by gigatoken (proven on a sample" in said
    assert "spec 'exact': chat text" not in said


def test_a_template_minijinja_writes_otherwise_is_rendered_by_jinja2(demo_copy: Path, qwen3: Path,
                                                                     tmp_path: Path) -> None:
    """A float jinja2 writes as 1e+20 and minijinja in full: the spec renders with jinja2, says so,
    and its lengths are the exact ones."""
    template = tmp_path / "float.jinja"
    template.write_text("{{ 1e20 }}" + template_text("qwen2_5"), encoding="utf-8")
    summary = render_store(demo_copy, qwen3, cutoff=1024, name="float", template=str(template), engines=FAST)
    assert summary.proof.engines == Engines("jinja2", "gigatoken")
    assert summary.proof.notes == ("minijinja: its text differs from jinja2's (text 0 of the "
                                   f"{summary.proof.entries} entries checked); jinja2 renders this spec",)
    exact = render_store(demo_copy, qwen3, cutoff=1024, name="float_exact", template=str(template))
    assert _lengths(demo_copy, "float") == _lengths(demo_copy, "float_exact") and exact.kept == summary.kept


def test_an_engine_that_cannot_run_leaves_the_exact_one(demo_copy: Path, qwen3: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Not installed: said, and the exact engines render. A tokenizer gigatoken refuses (WordPiece)
    is refused in one line by the renderer, and the proof keeps the model's tokenizer."""
    monkeypatch.setitem(sys.modules, "minijinja", None)
    monkeypatch.setitem(sys.modules, "gigatoken", None)
    summary = render_store(demo_copy, qwen3, cutoff=1024, name="plain", engines=FAST)
    assert summary.proof.engines == EXACT
    assert summary.proof.notes == (
        "minijinja: the minijinja template engine is not installed (pip install 'dataidx[fast]'); jinja2 renders "
        "this spec",
        "gigatoken: the gigatoken tokenizer engine is not installed (pip install 'dataidx[fast]'); the model's "
        "tokenizer tokenizes this spec")
    monkeypatch.undo()
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordPiece({"[UNK]": 0, "hi": 1, "<|im_start|>": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    with pytest.raises(Exception, match="gigatoken cannot run this tokenizer"):
        Renderer(tokenizer, template_text("qwen2_5"), cutoff=64, engines=Engines(tokenizer="gigatoken"))


def test_unknown_engines_are_refused_in_one_line() -> None:
    from dataidx.errors import RenderError

    with pytest.raises(RenderError, match="unknown template engine 'mako' \\(one of jinja2, minijinja\\)"):
        Engines("mako")
    with pytest.raises(RenderError, match="unknown tokenizer engine 'spm' \\(one of hf, gigatoken\\)"):
        Engines(tokenizer="spm")

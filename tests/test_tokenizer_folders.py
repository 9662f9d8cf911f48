"""Tokenizer folders read within bounds: files that are not files, too large or too many added
tokens are one line naming the file; a text the tokenizer fails on is that entry's render_error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.errors import RenderError
from dataidx.render import RenderRequest, load_tokenizer, render_store
from dataidx.render.shared_prefix import SharedPrefixes
from dataidx.render.tokenizer_folder import MAX_ADDED_TOKENS, MAX_SETTINGS_BYTES

from .helpers import alpaca_rows, examples, write_jsonl

pytest.importorskip("transformers")


@pytest.fixture
def folder(tiny_tokenizer: Path, tmp_path: Path) -> Path:
    """This test's copy of the tiny tokenizer's folder."""
    return Path(shutil.copytree(tiny_tokenizer, tmp_path / "tokenizer"))


def _with_added(folder: Path, count: int) -> Path:
    """``folder``'s tokenizer.json given ``count`` more added tokens (plain ones, as a data text could hold)."""
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    first = max(token["id"] for token in tokenizer["added_tokens"]) + 1 + len(tokenizer["model"]["vocab"])
    tokenizer["added_tokens"] += [{"id": first + k, "content": f"<x{k}>", "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": False} for k in range(count)]
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    return folder


def _loaded_in_a_process(folder: Path, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """Load ``folder`` and make a renderer of it in a process of its own under 4 GB of memory:
    what reads a device or a FIFO, or loads for ever, ends there, not in the tests."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    script = ("import sys; from dataidx.render import CHATML, Renderer, load_tokenizer; "
              "from dataidx.errors import DataidxError\n"
              "try:\n    Renderer(load_tokenizer(sys.argv[1]), CHATML, 512)\n"
              "except DataidxError as exc:\n    sys.exit(f'refused: {exc}')\nprint('loaded')")
    try:
        return subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True,
                              preexec_fn=limit, timeout=timeout, env={**os.environ, "RUST_BACKTRACE": "0"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading {folder} did not end in {timeout} s")


@pytest.mark.slow  # a process of its own: the old behaviour reads /dev/zero until memory runs out, or blocks
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_settings_file_that_is_a_device_or_a_fifo_is_refused_unread(folder: Path, kind: str) -> None:
    config = folder / "tokenizer_config.json"
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
        said = "a FIFO"
    else:
        config.symlink_to(kind)
        said = f"a link to {kind}, a character device"
    found = _loaded_in_a_process(folder, timeout=120)
    assert found.stderr.strip() == f"refused: {config}: {said}, not a file; a tokenizer's files must be regular files"


def test_a_tokenizer_json_linked_to_a_device_is_named_for_what_it_is(folder: Path, tmp_path: Path) -> None:
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to("/dev/null")
    with pytest.raises(RenderError) as raised:
        load_tokenizer(folder)
    assert str(raised.value) == (f"{folder / 'tokenizer.json'}: a link to /dev/null, a character device, not a file; "
                                 "a tokenizer's files must be regular files")
    assert "no tokenizer.json" not in str(raised.value)
    with pytest.raises(RenderError, match="a link to /dev/null, a character device, not a tokenizer folder"):
        load_tokenizer(folder / "tokenizer.json")
    (tmp_path / "missing").symlink_to(tmp_path / "nowhere")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(tmp_path / "missing")
    with pytest.raises(RenderError, match=f"tokenizer.json: a link to {tmp_path / 'missing'}, which does not exist"):
        load_tokenizer(folder)


def test_a_settings_file_past_its_bound_is_refused_unread(folder: Path) -> None:
    with open(folder / "special_tokens_map.json", "wb") as big:
        big.truncate(MAX_SETTINGS_BYTES + 1)  # sparse: nothing written, nothing read
    with pytest.raises(RenderError, match=f"special_tokens_map.json: {MAX_SETTINGS_BYTES + 1:,} bytes, more than the "
                                          f"{MAX_SETTINGS_BYTES:,} a tokenizer's settings file may have here"):
        load_tokenizer(folder)


def test_more_added_tokens_than_the_bound_are_refused_before_they_load(folder: Path) -> None:
    own = len(json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"])
    _with_added(folder, MAX_ADDED_TOKENS + 1 - own)
    with pytest.raises(RenderError, match=f"tokenizer.json: {MAX_ADDED_TOKENS + 1:,} added tokens, more than the "
                                          f"{MAX_ADDED_TOKENS:,} a tokenizer may have here"):
        load_tokenizer(folder)


@pytest.mark.slow  # a process of its own, 60,000 added tokens loaded: seconds; comparing every pair took 20 min
def test_a_tokenizer_with_tens_of_thousands_of_added_tokens_loads_in_seconds_not_minutes(folder: Path) -> None:
    found = _loaded_in_a_process(_with_added(folder, 60_000), timeout=300)
    assert found.returncode == 0 and found.stdout.strip() == "loaded", found.stderr[-2000:]


@settings(max_examples=examples(200))
@given(contents=st.lists(st.text(alphabet="<>ab|", min_size=1, max_size=5), min_size=1, max_size=30, unique=True))
def test_anchors_are_the_added_tokens_no_other_starts_with(contents: list[str]) -> None:
    from tokenizers import AddedToken, Tokenizer, models

    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.add_tokens([AddedToken(content, normalized=False) for content in contents])
    inner = {character for content in contents for character in content[1:]}
    expected = {content for content in contents if content[0] not in inner
                and not any(other != content and other.startswith(content) for other in contents)}
    assert set(SharedPrefixes(backend).anchors.values()) == expected


def test_a_malformed_chat_template_list_names_the_entry_and_the_key(folder: Path) -> None:
    (folder / "chat_template.jinja").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = [{"name": "default", "template": "{{ messages }}"}, {"template": "{{ tools }}"}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(RenderError) as raised:
        load_tokenizer(folder)
    assert str(raised.value) == (f"{folder / 'tokenizer_config.json'}: chat_template entry 1 (of 2) has no 'name'; "
                                 'each entry is {"name": ..., "template": ...}')


@pytest.mark.slow  # a build and a render: more than a second
def test_a_text_the_tokenizer_fails_on_is_that_entrys_render_error_and_the_others_render(
        folder: Path, tmp_path: Path, make_store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUST_BACKTRACE", "0")  # the panic's own lines, which the Rust library prints
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    # A pattern that backtracks on a long run of "a" not at the end: Oniguruma stops at its retry
    # limit, and the tokenizers library panics.
    tokenizer["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False},
        tokenizer["pre_tokenizer"]]}
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    rows = alpaca_rows(30)
    rows[7]["output"] = "a" * 60 + "b"
    store = make_store(f"qa:\n  path: {write_jsonl(tmp_path / 'qa.jsonl', rows)}\n  source: local\n"
                       "  converter: alpaca\n")
    summary = render_store(RenderRequest(store, folder, cutoff=256, jobs=1))
    assert summary.entries == 30 and summary.kept == 29
    assert [(cause.cause, cause.entries, cause.row) for cause in summary.causes] == [("tokenizer", 1, 7)]
    assert summary.causes[0].detail == ("the tokenizer failed on the entry's text: Onig: Regex search error: "
                                        "retry-limit-in-match over")

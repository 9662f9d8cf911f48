"""Token files and the writes around them: only a store's own files are ever removed or replaced,
a damaged, foreign or odd file is refused in one line, and a render says what it would lose."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from dataidx import DataEngine, PackedDataset
from dataidx.cli import cli
from dataidx.errors import StaleStoreError
from dataidx.render.token_file import HEADER, TokenFileWriter, index_offset
from dataidx.store import run_query

from .helpers import REPO


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def render(store: Path, tokenizer: Path, *args: object) -> Result:
    """``dataidx render STORE`` with the tiny tokenizer, stored tokens and one process (the demo is 28 entries)."""
    return run("render", store, "--tokenizer", tokenizer, "--jobs", "1", "--store-tokens", *args)


def token_folder(store: Path) -> Path:
    return store.with_name(store.name + ".tokens")


def token_file(store: Path, spec: str = "default") -> Path:
    """Where spec ``spec``'s token file is, as the store records it (in its own folder)."""
    (file, folder), = run_query(store, "SELECT t.file, t.folder FROM spec_tokens AS t JOIN render_specs AS s "
                                       "ON s.id = t.spec_id WHERE s.name = ?", [spec])[1]
    return (Path(folder) if folder else token_folder(store)) / file


@pytest.fixture
def stored(demo_copy: Path, tiny_tokenizer: Path) -> Path:
    """The demo store with spec 'default' rendered at cutoff 512, its tokens stored."""
    result = render(demo_copy, tiny_tokenizer, "--cutoff", "512", "-q")
    assert result.exit_code == 0, result.output
    return demo_copy


# --- what a write may remove or leave --------------------------------------------------------

def test_pruning_through_a_symlinked_token_folder_keeps_other_stores_files(demo_copy: Path, tmp_path: Path,
                                                                          tiny_tokenizer: Path) -> None:
    # Two stores whose STORE.tokens link to one folder on a bigger disk, rendered the same way.
    big = tmp_path / "big"
    big.mkdir()
    other = tmp_path / "other" / "demo.db"
    other.parent.mkdir()
    shutil.copyfile(demo_copy, other)
    for store in (demo_copy, other):
        token_folder(store).symlink_to(big, target_is_directory=True)
    stranger = big / "stranger.tokens"
    stranger.write_bytes(b"a file of some other tool")
    assert render(other, tiny_tokenizer, "--cutoff", "512", "-q").exit_code == 0
    others = token_file(other)
    before = others.read_bytes()
    for name, cutoff in (("default", "512"), ("short", "64")):
        assert render(demo_copy, tiny_tokenizer, "--cutoff", cutoff, "--name", name, "-q").exit_code == 0
    mine = [token_file(demo_copy), token_file(demo_copy, "short")]
    # The same rendering in another store: a file of its own, not the other store's replaced.
    assert others.resolve() not in [path.resolve() for path in mine]
    for name in ("default", "short"):
        result = run("remove-spec", demo_copy, name)
        assert result.exit_code == 0, result.output
    assert not any(path.exists() for path in mine)  # its own files go
    assert others.read_bytes() == before and stranger.exists()  # nothing it did not write
    with DataEngine(other, render="default") as engine:
        assert engine.reader.tokens is not None and engine[0]["input_ids"]


def test_a_failure_to_remove_an_old_token_file_after_the_commit_is_a_note_not_an_error(
        stored: Path, tiny_tokenizer: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = token_folder(stored)
    (folder / "kept.tokens").mkdir()  # a folder named like a token file: never the store's to remove
    result = render(stored, tiny_tokenizer, "--cutoff", "256", "--name", "second", "-q")
    assert result.exit_code == 0, result.output
    assert (folder / "kept.tokens").is_dir()
    # The file a spec names becomes a folder: removing the spec commits, then cannot remove it.
    second = token_file(stored, "second")
    second.unlink()
    second.mkdir()
    with caplog.at_level("WARNING"):
        result = run("remove-spec", stored, "second")
    assert result.exit_code == 0, result.output
    assert second.is_dir() and "second" not in [name for name, in run_query(stored, "SELECT name FROM render_specs")[1]]
    assert [record.getMessage() for record in caplog.records] == [
        f"{second}: left in place, though no render spec names it now: not a regular file"]


def test_a_build_over_a_store_removes_the_token_files_it_recorded_and_no_other(stored: Path) -> None:
    from dataidx.index import build

    file, stranger = token_file(stored), token_folder(stored) / "stranger.tokens"
    stranger.write_bytes(b"a file of some other tool")
    build(REPO / "data" / "demo_sft.yaml", stored, replace=True)  # the new store names no token file
    assert not file.exists() and stranger.exists()


def test_an_interrupted_store_tokens_render_leaves_no_token_folder(demo_copy: Path, tiny_tokenizer: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: TokenFileWriter, words: np.ndarray) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(TokenFileWriter, "append", interrupted)
    before = demo_copy.read_bytes()
    assert render(demo_copy, tiny_tokenizer, "--cutoff", "512").exit_code != 0
    assert demo_copy.read_bytes() == before
    assert not token_folder(demo_copy).exists()


# --- what a reader may open ------------------------------------------------------------------

def test_a_token_row_naming_a_file_outside_its_folder_is_refused_and_never_removed(stored: Path,
                                                                                   tmp_path: Path) -> None:
    # A copy of the real file elsewhere: the old reader served it, wherever the row said it was.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = shutil.copy(token_file(stored), elsewhere / "copy.tokens")
    for named in (str(copy), f"../elsewhere/{Path(copy).name}", "../demo.db"):
        with sqlite3.connect(stored) as connection:
            connection.execute("UPDATE spec_tokens SET file = ?", (named,))
        connection.close()
        with pytest.raises(StaleStoreError, match="not a file name in its token folder"):
            DataEngine(stored, render="default")
    result = run("remove-spec", stored, "default")
    assert result.exit_code == 0, result.output
    assert stored.exists() and Path(copy).exists()  # '../demo.db' named the store itself


@pytest.mark.slow  # a subprocess: on a FIFO the old reader waited for a writer forever
def test_a_token_file_that_is_a_fifo_is_refused_not_waited_on(stored: Path) -> None:
    file = token_file(stored)
    file.unlink()
    os.mkfifo(file)
    program = f"""
from dataidx import DataEngine, PackedDataset
from dataidx.errors import StaleStoreError
try:
    DataEngine({str(stored)!r}, render="default")
except StaleStoreError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout
    verify = subprocess.run([sys.executable, "-m", "dataidx", "verify", str(stored), "--tokens"], capture_output=True,
                            text=True, timeout=120)
    assert verify.returncode == 1 and "not a regular file" in verify.stdout


def _index(file: Path) -> np.memmap:
    _, word_bytes, _, words, entries, _, _ = HEADER.unpack(file.read_bytes()[:HEADER.size])
    return np.memmap(file, dtype="<u8", mode="r+", offset=index_offset(words, word_bytes), shape=(entries + 1,))


def test_a_token_file_whose_index_was_edited_is_refused_as_damaged(stored: Path) -> None:
    assert run("pack", stored, "--spec", "default", "--capacity", "1024").exit_code == 0
    file = token_file(stored)
    with PackedDataset(stored, plan="default") as packs:
        before = [packs[i] for i in range(len(packs))]
        members = [packs.packs.member_entries(i) for i in range(len(packs))]
        tokens = packs.packs.tokens
        assert tokens is not None
    # An entry that trains followed by one that trains: the first's end is the second's start.
    trained = {entry for pack in members for entry in pack}
    entry = min(e for e in trained if e + 1 in trained)
    good = file.read_bytes()
    index = _index(file)
    words = int(index[-1])
    index[entry + 1 - tokens.first_entry] = words + 10_000  # one edited value: past the words
    index.flush()
    with PackedDataset(stored, plan="default") as packs:  # fetches check their own entries
        for i, pack in enumerate(members):
            if entry in pack or entry + 1 in pack:  # one ends past the words, the next ends before it starts
                with pytest.raises(StaleStoreError, match="token file damaged: its index places base entry"):
                    packs[i]
            else:
                assert packs[i] == before[i]
    # Some entries do not train at cutoff 512: a reader finds which do from the index, and checks them all.
    assert run_query(stored, "SELECT kept < entries FROM render_specs")[1] == [(1,)]
    with pytest.raises(StaleStoreError, match="token file damaged: its index places base entry"):
        DataEngine(stored, render="default")
    for end, value in ((0, 1), (-1, words - 1)):  # the index's ends: checked on open
        file.write_bytes(good)
        index = _index(file)
        index[end] = value
        index.flush()
        with pytest.raises(StaleStoreError, match="token file damaged: its index runs from word"):
            DataEngine(stored, render="default")
    del index


def test_an_export_of_an_entry_the_store_places_past_the_words_is_refused_as_damaged(stored: Path,
                                                                                     tmp_path: Path) -> None:
    with sqlite3.connect(stored) as connection:
        connection.execute("UPDATE entry_renders SET token_offset = token_offset + 100000 WHERE entry_id = "
                           "(SELECT min(entry_id) FROM entry_renders WHERE token_offset IS NOT NULL)")
    connection.close()
    result = run("export", stored, "--spec", "default", "--format", "megatron", "-o", tmp_path / "out", "-q")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "token file damaged: the store places an entry at words" in result.output
    assert not (tmp_path / "out").exists()


# --- what an export may replace --------------------------------------------------------------

def test_export_with_force_refuses_the_store_s_token_folder_and_a_tokens_dir(stored: Path, tmp_path: Path,
                                                                            tiny_tokenizer: Path) -> None:
    far = tmp_path / "far"
    assert render(stored, tiny_tokenizer, "--cutoff", "256", "--name", "far", "--tokens-dir", far, "-q").exit_code == 0
    files = {spec: token_file(stored, spec).read_bytes() for spec in ("default", "far")}
    for folder in (token_folder(stored), far):
        result = run("export", stored, "--spec", "default", "--format", "megatron", "-o", folder, "--force")
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert "refusing to write over it: it holds the token file of spec" in result.output
    assert {spec: token_file(stored, spec).read_bytes() for spec in ("default", "far")} == files


# --- what a render may replace ---------------------------------------------------------------

def test_rendering_a_spec_again_another_way_is_refused_naming_what_would_go_unless_replace(
        stored: Path, tiny_tokenizer: Path) -> None:
    assert run("pack", stored, "--spec", "default", "--capacity", "1024").exit_code == 0
    file = token_file(stored)
    refused = render(stored, tiny_tokenizer, "--cutoff", "256")
    assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
    for named in ("spec 'default'", "packing plan 'default'", f"stored tokens ({file.name})", "--replace"):
        assert named in refused.output
    assert file.exists() and run_query(stored, "SELECT name FROM packing_plans")[1] == [("default",)]
    assert run_query(stored, "SELECT cutoff FROM render_specs")[1] == [(512,)]
    replaced = render(stored, tiny_tokenizer, "--cutoff", "256", "--replace")
    assert replaced.exit_code == 0, replaced.output
    last = replaced.output.strip().splitlines()[-1]
    assert "removed 1 packing plan made with its old lengths and its stored tokens" in last, last
    assert not file.exists() and run_query(stored, "SELECT count(*) FROM packing_plans")[1] == [(0,)]
    assert render(stored, tiny_tokenizer, "--cutoff", "256").exit_code == 0  # the same rendering again: up to date


# --- what plain verify checks ----------------------------------------------------------------

def test_plain_verify_fails_a_store_copied_without_its_token_folder(stored: Path, tmp_path: Path) -> None:
    assert run("verify", stored).exit_code == 0
    copy = tmp_path / "copied" / "demo.db"
    copy.parent.mkdir()
    shutil.copyfile(stored, copy)
    result = run("verify", copy)
    assert result.exit_code == 1
    assert "render spec 'default': " in result.output and "token file of spec 'default' is missing" in result.output


# --- a render that trains little -------------------------------------------------------------

def test_a_render_where_most_entries_will_not_train_says_so_loudly(demo_copy: Path, tiny_tokenizer: Path) -> None:
    result = run("render", demo_copy, "--tokenizer", tiny_tokenizer, "--cutoff", "16", "--jobs", "1")
    assert result.exit_code == 0, result.output
    (kept,), = run_query(demo_copy, "SELECT kept FROM render_specs")[1]
    assert kept < 28 // 2
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"warning: only {kept} of 28 entries") and "--cutoff 16" in last, last
    quiet = run("render", demo_copy, "--tokenizer", tiny_tokenizer, "--cutoff", "16", "--name", "q", "-q")
    assert quiet.output.startswith("warning: only")  # said even with -q
    fine = run("render", demo_copy, "--tokenizer", tiny_tokenizer, "--cutoff", "512", "--name", "fine")
    assert "warning" not in fine.output

"""Token files and the writes around them: only a store's own files are ever removed or replaced,
a damaged, foreign or odd file is refused in one line, and a render says what it would lose."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.render.token_file import TokenFileWriter
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

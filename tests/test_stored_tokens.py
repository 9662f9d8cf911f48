"""Tokens stored once (``dataidx render --store-tokens``): served bit for bit as rendered, with no
tokenizer in the process, and every damaged, moved or half-written token file refused in one line."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from dataidx import Collator, DataEngine, PackedDataset
from dataidx.cli import cli
from dataidx.errors import StaleStoreError
from dataidx.render import Rendered
from dataidx.render.token_file import HEADER, TokenFileWriter, index_offset
from dataidx.render.tokens import encode as encode_tokens
from dataidx.render.tokens import served, word_dtype
from dataidx.store import run_query

from .helpers import REPO, write_jsonl, write_yaml


def _message(role: str, text: str, weight: float | None = None) -> dict:
    message: dict = {"role": role, "content": [{"type": "text", "value": text}]}
    if weight is not None:
        message["loss_weight"] = weight
    return message


def _config(folder: Path) -> Path:
    """The demo data, a dataset with unusual loss weights, and preference pairs."""
    weighted = write_jsonl(folder / "weighted.jsonl", [
        {"messages": [_message("user", f"Question {i}?", 0.0), _message("assistant", f"Answer {i}.", 0.5),
                      _message("user", "And then?", 0.0), _message("assistant", "Then 0.1.", 0.1)]}
        for i in range(12)])
    pairs = write_jsonl(folder / "pairs.jsonl", [
        {"chosen_messages": [_message("user", f"Pick {i}."), _message("assistant", "The good one.")],
         "rejected_messages": [_message("user", f"Pick {i}."), _message("assistant", "The bad one, at length.")]}
        for i in range(6)])
    demo = (REPO / "data" / "demo_sft.yaml").read_text().replace("path: data/", f"path: {REPO}/data/")
    return write_yaml(folder / "config.yaml", demo + f"""
weighted:
  path: {weighted}
  source: local
  converter: none
pairs:
  path: {pairs}
  source: local
  converter: none
""")


def run(*args: str) -> object:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    return result


@pytest.fixture(scope="module")
def token_store(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    """One store rendered twice the same way: spec ``rendered`` (on fetch) and ``stored`` (tokens)."""
    from dataidx.index import build

    folder = tmp_path_factory.mktemp("tokens")
    store = folder / "t.db"
    build(_config(folder), store)
    for name, extra in (("rendered", ()), ("stored", ("--store-tokens",))):
        result = CliRunner().invoke(cli, ["render", str(store), "--tokenizer", str(tiny_tokenizer), "--cutoff", "512",
                                          "--truncation", "right", "--name", name, "-q", *extra])
        assert result.exit_code == 0, result.output
    return store


def _copy(store: Path, tmp_path: Path) -> Path:
    """A copy of a store with its token folder."""
    copy = tmp_path / store.name
    shutil.copyfile(store, copy)
    shutil.copytree(store.with_name(store.name + ".tokens"), copy.with_name(copy.name + ".tokens"))
    return copy


def test_every_entry_from_tokens_equals_its_rendering(token_store: Path) -> None:
    with DataEngine(token_store, render="rendered") as rendered, DataEngine(token_store, render="stored") as stored:
        assert stored.reader.tokens is not None and rendered.reader.tokens is None
        everything = list(range(len(stored)))
        from_tokens = stored[everything]
        assert from_tokens == rendered[everything] and len(from_tokens) == len(rendered) > 40
        assert [stored[i] for i in (0, 7, -1)] == [rendered[i] for i in (0, 7, -1)]
        # unusual weights and both sides of a pair came back too
        assert any(0.5 in one.get("loss_weights", ()) for one in from_tokens)
        assert any("chosen" in one for one in from_tokens)
        assert all(type(w) is float for one in from_tokens if "loss_weights" in one for w in one["loss_weights"])


def test_a_spec_where_some_entries_do_not_train_serves_the_same_positions_from_tokens(
        token_store: Path, tmp_path: Path, tiny_tokenizer: Path) -> None:
    # Which positions train is read from the token file's index (no lengths query): same as the store says.
    store = _copy(token_store, tmp_path)
    for name, extra in (("short", ()), ("short-tokens", ("--store-tokens",))):
        result = run("render", store, "--tokenizer", tiny_tokenizer, "--cutoff", "40", "--name", name, "-q", *extra)
        assert result.exit_code == 0, result.output
    statuses = dict(run_query(store, "SELECT status, count(*) FROM entry_lengths WHERE spec = 'short' GROUP BY 1")[1])
    assert statuses.get("too_long", 0) > 10 and statuses["ok"] > 10
    with DataEngine(store, render="short") as rendered, DataEngine(store, render="short-tokens") as stored:
        assert stored.reader.tokens is not None and stored.reader.positions is not None
        assert np.array_equal(stored.reader.positions, rendered.reader.positions)
        assert stored[list(range(len(stored)))] == rendered[list(range(len(rendered)))]


def test_a_packed_plan_from_tokens_equals_its_rendering(token_store: Path, tmp_path: Path) -> None:
    store = _copy(token_store, tmp_path)
    sft = write_yaml(tmp_path / "sft.yaml", (REPO / "data" / "demo_sft.yaml").read_text()
                     .replace("path: data/", f"path: {REPO}/data/"))
    assert run("mix", store, sft, "--name", "sft").exit_code == 0
    for spec in ("rendered", "stored"):
        result = run("pack", store, "--spec", spec, "--mixture", "sft", "--capacity", "512", "--name", spec)
        assert result.exit_code == 0, result.output
    collate = Collator(pad_token_id=0)
    with PackedDataset(store, plan="rendered") as rendered, PackedDataset(store, plan="stored") as stored:
        assert stored.packs.tokens is not None and len(stored) == len(rendered) > 1
        for i in range(len(stored)):
            assert stored[i] == rendered[i]
        batch, again = collate([stored[0], stored[1]]), collate([rendered[0], rendered[1]])
        assert batch.keys() == again.keys()
        assert all(np.array_equal(np.asarray(batch[key]), np.asarray(again[key])) for key in batch)


def test_a_dataloader_worker_serving_tokens_imports_no_tokenizer_or_template(token_store: Path) -> None:
    program = f"""
import sys
from torch.utils.data import DataLoader
from dataidx import DataEngine

def loaded(batch):
    return sorted(m for m in ("transformers", "tokenizers", "jinja2", "minijinja") if m in sys.modules)

with DataEngine({str(token_store)!r}, render="stored") as engine:
    engine[0]
    workers = list(DataLoader(engine, batch_size=4, num_workers=2, collate_fn=loaded))
print(loaded(None), workers[0], len(workers))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("]")[0] + "]" == "[]" and done.stdout.startswith("[] [] ")


def test_adding_tokens_to_a_rendered_spec_keeps_its_lengths(token_store: Path, tmp_path: Path) -> None:
    store = _copy(token_store, tmp_path)
    lengths = "SELECT entry_id, tokens, supervised_tokens, full_tokens, status FROM entry_renders AS r " \
              "JOIN render_specs AS s ON s.id = r.spec_id WHERE s.name = 'rendered' ORDER BY entry_id"
    _, before = run_query(store, lengths)
    tokenizer = run_query(store, "SELECT tokenizer FROM render_specs WHERE name = 'rendered'")[1][0][0]
    args = ("render", store, "--tokenizer", tokenizer, "--cutoff", "512", "--truncation", "right", "--name",
            "rendered", "--store-tokens")
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "stored the tokens of spec 'rendered'" in result.output and "its lengths unchanged" in result.output
    assert run_query(store, lengths)[1] == before
    again = run(*args)
    assert again.exit_code == 0 and "is up to date" in again.output
    with DataEngine(store, render="rendered") as added, DataEngine(store, render="stored") as stored:
        assert added.reader.tokens is not None and added[list(range(len(added)))] == stored[list(range(len(stored)))]
    _, files = run_query(store, "SELECT spec, entries, word_bytes, bytes_per_token FROM token_files ORDER BY spec")
    assert [row[:3] for row in files] == [("rendered", files[0][1], 2), ("stored", files[0][1], 2)]
    assert 2.0 < files[0][3] < 2.3  # 16-bit words, and an 8-byte index start per base entry


def test_a_truncated_swapped_or_missing_token_file_is_refused_in_one_line(token_store: Path, tmp_path: Path,
                                                                          tiny_tokenizer: Path) -> None:
    store = _copy(token_store, tmp_path)
    folder = store.with_name(store.name + ".tokens")
    file, = folder.glob("*.tokens")
    data = file.read_bytes()
    file.write_bytes(data[:-2])
    with pytest.raises(StaleStoreError, match="truncated or edited; run dataidx render --store-tokens again"):
        DataEngine(store, render="stored")
    result = run("show", store, "0", "--render", "stored")
    assert result.exit_code == 0  # show renders whatever the status: it never reads the token file
    # Another spec's token file put in its place
    assert run("render", store, "--tokenizer", tiny_tokenizer, "--cutoff", "64", "--name", "other", "-q",
               "--store-tokens").exit_code == 0
    other = next(path for path in folder.glob("*.tokens") if path != file)
    shutil.copyfile(other, file)
    with pytest.raises(StaleStoreError, match="holds the tokens of another rendering"):
        DataEngine(store, render="stored")
    # A store moved without its .tokens folder
    moved = tmp_path / "moved" / "t.db"
    moved.parent.mkdir()
    shutil.copyfile(store, moved)
    with pytest.raises(StaleStoreError, match=r"missing \(a store moved without its .tokens folder\?\)"):
        DataEngine(moved, render="other")
    program = f"from dataidx import DataEngine; DataEngine({str(moved)!r}, render='other')"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "is missing" in done.stderr


def test_verify_tokens_finds_a_word_edited_in_place(token_store: Path, tmp_path: Path) -> None:
    store = _copy(token_store, tmp_path)
    good = run("verify", store, "--tokens", "--all", "--json")
    assert good.exit_code == 0, good.output
    report = json.loads(good.output)
    assert report["ok"] and report["specs"][0]["checked"] == report["specs"][0]["entries"] > 40
    file, = store.with_name(store.name + ".tokens").glob("*.tokens")
    words = np.memmap(file, dtype="<u2", mode="r+", offset=HEADER.size)
    words[5] ^= 1  # same size, same header: only the digest and a fresh rendering can tell
    words.flush()
    del words
    bad = run("verify", store, "--tokens", "--all")
    assert bad.exit_code == 1
    assert "sha256 is not the one recorded" in bad.output and "differ from the stored tokens" in bad.output
    assert "1 differ" in bad.output and "input_ids from token 5" in bad.output


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_full_disk_or_ctrl_c_while_writing_leaves_no_token_file(token_store: Path, tmp_path: Path,
                                                                 tiny_tokenizer: Path, monkeypatch,
                                                                 failure: BaseException) -> None:
    from dataidx.render import RenderRequest, render_store

    store = _copy(token_store, tmp_path)
    folder = store.with_name(store.name + ".tokens")
    before, files = store.read_bytes(), sorted(folder.iterdir())
    calls = iter(range(100))
    original = TokenFileWriter.append

    def failing(self: TokenFileWriter, words: np.ndarray) -> int:
        if next(calls) == 1:
            raise failure
        return original(self, words)

    monkeypatch.setattr(TokenFileWriter, "append", failing)
    monkeypatch.setattr("dataidx.render.lengths.ENTRIES_PER_RENDER_CHUNK", 50)  # several chunks
    expected = StaleStoreError if isinstance(failure, OSError) else KeyboardInterrupt
    with pytest.raises((expected, OSError)):
        render_store(RenderRequest(store, tiny_tokenizer, cutoff=100, name="new", store_tokens=True, jobs=1))
    assert store.read_bytes() == before and sorted(folder.iterdir()) == files  # nothing left, nothing published


def test_render_of_a_full_disk_says_so_in_one_line(token_store: Path, tmp_path: Path, tiny_tokenizer: Path,
                                                   monkeypatch) -> None:
    store = _copy(token_store, tmp_path)

    def full(self: TokenFileWriter, words: np.ndarray) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(TokenFileWriter, "append", full)
    result = run("render", store, "--tokenizer", tiny_tokenizer, "--cutoff", "100", "--name", "new", "--store-tokens",
                 "-q", "--jobs", "1")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "No space left on device" in result.output


def _rendered(sides: list[tuple[list[int], list[bool], list[float]]]) -> Rendered:
    def one(ids: list[int], supervised: list[bool], weights: list[float]) -> Rendered:
        return Rendered(input_ids=ids, labels=[i if s else -100 for i, s in zip(ids, supervised)],
                        loss_weights=weights)
    if len(sides) == 1:
        return one(*sides[0])
    return Rendered(sides={"chosen": one(*sides[0]), "rejected": one(*sides[1])})


@st.composite
def _sides(draw: st.DrawFn, top: int) -> tuple[list[int], list[bool], list[float]]:
    n = draw(st.integers(0, 40))
    ids = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
    # v1's labels (a prompt, then its answer: the decode's fast path), or any pattern at all
    head = draw(st.integers(0, n))
    supervised = draw(st.one_of(st.just([k >= head for k in range(n)]),
                                st.lists(st.booleans(), min_size=n, max_size=n)))
    weights = draw(st.one_of(
        st.just([1.0 if s else 0.0 for s in supervised]),
        st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.1, 1e-9, 2.0, -0.0]), min_size=n, max_size=n)))
    return ids, supervised, weights


@given(st.sampled_from([2**15, 2**31]).flatmap(
    lambda vocabulary: st.tuples(st.just(vocabulary), st.lists(_sides(vocabulary - 1), min_size=1, max_size=2))))
def test_words_and_weight_runs_give_back_any_rendering_bit_for_bit(drawn: tuple[int, list]) -> None:
    vocabulary, sides = drawn
    rendered = _rendered(sides)
    dtype = word_dtype(vocabulary)
    stored = encode_tokens(rendered, dtype)
    words = np.concatenate([np.zeros(3, dtype=dtype), stored.words])  # not at offset 0
    back, = served(words, [(3, len(stored.words), stored.side_tokens, stored.weights, None)], ["d"])
    assert back.pop("_dataset_name") == "d" and back == rendered.as_dict()
    assert json.dumps(back) == json.dumps(rendered.as_dict())  # -0.0 and 1e-9 stay what they were


@given(st.sampled_from([2**15, 2**31]).flatmap(lambda vocabulary: st.tuples(
    st.just(vocabulary), st.lists(st.lists(_sides(vocabulary - 1), min_size=1, max_size=2), min_size=2, max_size=6),
    st.randoms(use_true_random=False))))
def test_a_batch_of_entries_decodes_each_as_alone_in_any_order(drawn: tuple[int, list, Any]) -> None:
    vocabulary, entries, rng = drawn
    dtype = word_dtype(vocabulary)
    renderings = [_rendered(sides) for sides in entries]
    for k, rendered in enumerate(renderings[::3]):  # some carry v1's extra_info, which comes back with them
        rendered.extra_info = json.dumps({"kto_label": k % 2 == 0})
    stored = [encode_tokens(rendered, dtype) for rendered in renderings]
    # Stored in one order, asked for in another: a batch reads in stored order, answers in the asked one.
    placed = list(range(len(stored)))
    rng.shuffle(placed)
    words, offsets = [np.zeros(2, dtype=dtype)], {}
    for k in placed:
        offsets[k] = sum(len(w) for w in words)
        words.append(stored[k].words)
    asked = list(range(len(stored)))
    rng.shuffle(asked)
    rows = [(offsets[k], len(stored[k].words), stored[k].side_tokens, stored[k].weights, renderings[k].extra_info)
            for k in asked]
    back = served(np.concatenate(words), rows, [f"d{k}" for k in asked])
    assert [one.pop("_dataset_name") for one in back] == [f"d{k}" for k in asked]
    assert back == [renderings[k].as_dict() for k in asked]
    assert json.dumps(back) == json.dumps([renderings[k].as_dict() for k in asked])


def test_word_size_follows_the_vocabulary() -> None:
    assert word_dtype(32768) == np.dtype("<u2") and word_dtype(32769) == np.dtype("<u4")
    with pytest.raises(Exception, match="does not fit 31-bit token words"):
        word_dtype(2**31 + 1)


def test_a_file_no_spec_names_is_removed_one_two_specs_share_is_kept(token_store: Path, tmp_path: Path,
                                                                      tiny_tokenizer: Path) -> None:
    store = _copy(token_store, tmp_path)
    folder = store.with_name(store.name + ".tokens")
    first, = folder.glob("*.tokens")
    assert run("render", store, "--tokenizer", tiny_tokenizer, "--cutoff", "512", "--truncation", "right", "--name",
               "twin", "-q", "--store-tokens").exit_code == 0
    assert list(folder.glob("*.tokens")) == [first]  # the same rendering: one file for both specs
    assert run("remove-spec", store, "stored").exit_code == 0
    assert list(folder.glob("*.tokens")) == [first]  # 'twin' still names it
    # Rendered again another way (its stored tokens go: --replace): a new file, the old one unnamed.
    assert run("render", store, "--tokenizer", tiny_tokenizer, "--cutoff", "300", "--name", "twin", "-q",
               "--store-tokens", "--replace").exit_code == 0
    second, = folder.glob("*.tokens")
    assert second != first
    with DataEngine(store, render="twin") as engine:
        assert engine.reader.tokens is not None and engine[0]["input_ids"]
    assert run("remove-spec", store, "twin").exit_code == 0
    assert list(folder.glob("*.tokens")) == []


def test_info_and_the_view_show_the_tokens_on_disk(token_store: Path) -> None:
    info = json.loads(run("info", token_store, "--json").output)
    specs = {spec["name"]: spec for spec in info["render_specs"]}
    assert specs["rendered"]["tokens"] is None
    stored = specs["stored"]["tokens"]
    assert stored["word_bytes"] == 2 and stored["bytes"] > HEADER.size + 2 * stored["tokens"]
    assert "spec 'stored': tokens stored" in run("info", token_store).output


@pytest.mark.slow  # a tokenizer of 33,000 added tokens takes seconds to load, each time
def test_a_vocabulary_past_2_15_ids_is_stored_in_32_bit_words(tmp_path: Path, wide_tokenizer: Path) -> None:
    from dataidx.index import build

    store = tmp_path / "wide.db"
    build(_config(tmp_path), store)
    for name, extra in (("rendered", ()), ("stored", ("--store-tokens",))):
        result = run("render", store, "--tokenizer", wide_tokenizer, "--cutoff", "512", "--name", name, "-q", *extra)
        assert result.exit_code == 0, result.output
    _, files = run_query(store, "SELECT word_bytes, bytes, tokens FROM token_files")
    assert files[0][0] == 4 and files[0][1] > HEADER.size + 4 * files[0][2]
    with DataEngine(store, render="rendered") as rendered, DataEngine(store, render="stored") as stored:
        assert stored[list(range(len(stored)))] == rendered[list(range(len(rendered)))]


def test_verify_tokens_finds_an_index_edited_in_place(token_store: Path, tmp_path: Path) -> None:
    store = _copy(token_store, tmp_path)
    file, = store.with_name(store.name + ".tokens").glob("*.tokens")
    header = HEADER.unpack(file.read_bytes()[:HEADER.size])
    words, word_bytes = header[3], header[1]
    index = np.memmap(file, dtype="<u8", mode="r+", offset=index_offset(words, word_bytes))
    index[3] += 1  # entry 3 now starts a word late, entry 2 ends a word late
    index.flush()
    del index
    bad = run("verify", store, "--tokens", "--all")
    assert bad.exit_code == 1 and "its index places base entry" in bad.output

"""Pretraining text (LLaMA-Factory's ``pt`` stage, XTuner's incremental pretraining): a ``.txt``
file's lines, ``c4_demo.jsonl``'s ``text`` rows and ``converter: text`` rows render as documents,
the text's ids and the tokenizer's EOS, every token trained, as LLaMA-Factory's
``PretrainDatasetProcessor`` makes them; they are packed like other entries.

With DATAIDX_LLAMAFACTORY naming LLaMA-Factory's ``src`` (ff6d4d12), its processor itself is run
here; else :func:`transcribed` is that processor, line for line."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from dataidx import DataEngine
from dataidx.errors import SourceError
from dataidx.index import build
from dataidx.render import CHATML, Renderer, RenderRequest, render_store
from dataidx.store import run_query

from .helpers import SHARED_DATA, one_line_error, read_jsonl, train_tokenizer, write_jsonl, write_yaml

pytest.importorskip("transformers")

C4 = SHARED_DATA / "c4_demo.jsonl"
requires_c4 = pytest.mark.skipif(not C4.is_file(), reason="../shared/data/c4_demo.jsonl is not beside the repo")
LINES = ["The answer is 42.", "", "hello world, how are you today?", "question answer <|im_end|> tool call"]


def transcribed(tokenizer: Any, texts: list[str], cutoff: int) -> list[list[int]]:
    """LLaMA-Factory's ``PretrainDatasetProcessor.preprocess_dataset`` (src/llamafactory/data/processor/
    pretrain.py at ff6d4d12) without packing, for a template other than llama3: each text is its
    ``_prompt``'s first content (``dataset_info.json`` maps ``text`` to the prompt)."""
    examples = [text + tokenizer.eos_token for text in texts]
    if getattr(tokenizer, "add_bos_token", False):
        examples = [tokenizer.bos_token + example for example in examples]
    return tokenizer(examples, add_special_tokens=False, truncation=True, max_length=cutoff)["input_ids"]


def llamafactory_pretrain(tokenizer: Any, texts: list[str], cutoff: int) -> list[list[int]]:
    """The ids LLaMA-Factory's pt stage makes of ``texts``: its own processor when
    DATAIDX_LLAMAFACTORY names its source, else :func:`transcribed`. Its labels are these ids
    (the pt stage's ``DataCollatorForLanguageModeling`` copies them)."""
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    if not source:
        return transcribed(tokenizer, texts, cutoff)
    sys.path.insert(0, source)
    for name in ("llamafactory", "llamafactory.data", "llamafactory.data.processor"):  # skip their __init__s
        package = types.ModuleType(name)
        package.__path__ = [str(Path(source, *name.split(".")))]
        sys.modules.setdefault(name, package)
    from llamafactory.data.processor.pretrain import PretrainDatasetProcessor  # type: ignore[import-not-found]

    arguments = types.SimpleNamespace(template="default", packing=False, cutoff_len=cutoff)
    processor = PretrainDatasetProcessor(template=None, tokenizer=tokenizer, processor=None, data_args=arguments)
    made = processor.preprocess_dataset({"_prompt": [[{"role": "user", "content": text}] for text in texts]})
    return made["input_ids"]


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pretrain-tokenizer")
    train_tokenizer(folder)
    return folder


def _documents_store(folder: Path, tokenizer: Path, cutoff: int) -> Path:
    """A store of c4_demo.jsonl (no converter, and ``converter: text``) and a .txt file, rendered."""
    (folder / "wiki.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    write_yaml(folder / "pt.yaml", f"c4:\n  path: {C4}\n  source: local\n"
               f"wiki:\n  path: {folder / 'wiki.txt'}\n  source: local\n"
               f"c4_text:\n  path: {C4}\n  source: local\n  converter: text\n")
    build(folder / "pt.yaml", folder / "pt.db")
    render_store(RenderRequest(store=folder / "pt.db", tokenizer=tokenizer, template="chatml", cutoff=cutoff, jobs=1,
                               truncation="right", name="pt", store_tokens=True))
    return folder / "pt.db"


@requires_c4
def test_text_documents_render_as_llamafactorys_pretrain_stage(tmp_path: Path, tokenizer_folder: Path) -> None:
    from transformers import AutoTokenizer

    cutoff = 1024
    store = _documents_store(tmp_path, tokenizer_folder, cutoff)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    texts = [row["text"] for row in read_jsonl(C4)]
    expected = llamafactory_pretrain(tokenizer, texts, cutoff)
    # On purpose, dataidx escapes a control token in data text (U+200B after its first character)
    # as it does in a message, where LLaMA-Factory's pt stage tokenizes it as the token.
    lines = [*LINES[:3], LINES[3].replace("<|im_end|>", "<\u200b|im_end|>")]
    expected += llamafactory_pretrain(tokenizer, lines, cutoff) + expected
    with DataEngine(store, render="pt") as engine:
        served = engine[list(range(len(engine)))]
    assert [one["_dataset_name"] for one in served] == ["c4"] * 300 + ["wiki"] * 4 + ["c4_text"] * 300
    assert [one["input_ids"] for one in served] == expected
    assert all(one["labels"] == one["input_ids"] and set(one["loss_weights"]) == {1.0} for one in served)
    eos = tokenizer.eos_token_id
    assert served[300]["input_ids"][-1] == eos and served[301]["input_ids"] == [eos]  # an empty line: EOS alone
    # "<|im_end|>" in data text stays text (escaped, as in a message): not a control token
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") not in served[303]["input_ids"]
    statuses = dict(run_query(store, "SELECT status, count(*) FROM entry_lengths GROUP BY status")[1])
    long = sum(len(tokenizer(text)["input_ids"]) + 1 > cutoff for text in texts)
    assert statuses == {"ok": 604 - 2 * long, "truncated": 2 * long} and long > 0


def test_text_documents_are_too_long_under_drop_and_keep_a_bos_as_llamafactory_does(tokenizer_folder: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    renderer = Renderer(tokenizer, CHATML, cutoff=8)
    short, long = renderer.render_many([({"text": "The answer"}, False), ({"text": LINES[2]}, False)])
    assert (short.status, short.input_ids) == ("ok", llamafactory_pretrain(tokenizer, ["The answer"], 8)[0])
    assert long.status == "too_long" and long.full_tokens == len(tokenizer(LINES[2])["input_ids"]) + 1
    tokenizer.add_bos_token = True  # what Llama's tokenizers say: LLaMA-Factory's pt stage writes BOS first
    with_bos = Renderer(tokenizer, CHATML, cutoff=64).render({"text": LINES[0]}, False)
    assert with_bos.input_ids == llamafactory_pretrain(tokenizer, [LINES[0]], 64)[0]
    assert with_bos.input_ids[0] == tokenizer.bos_token_id and with_bos.labels == with_bos.input_ids


@requires_c4
def test_text_documents_pack_like_other_entries(tmp_path: Path, tokenizer_folder: Path) -> None:
    from click.testing import CliRunner

    from dataidx.cli import cli
    from dataidx.training import PackedDataset

    store = _documents_store(tmp_path, tokenizer_folder, 1024)
    packed = CliRunner().invoke(cli, ["pack", str(store), "--spec", "pt", "--capacity", "2048", "--seed", "0",
                                      "--name", "docs"])
    assert packed.exit_code == 0, packed.output
    members = run_query(store, "SELECT count(*), count(DISTINCT pack) FROM pack_members")[1][0]
    assert members[0] == 604 and 0 < members[1] < 604
    with DataEngine(store, render="pt") as engine, PackedDataset(store, "docs") as packs:
        documents = sorted(one["input_ids"] for one in engine[list(range(len(engine)))])
        packed = list(packs)
    assert all(sum(len(one["input_ids"]) for one in pack) <= 2048 for pack in packed)
    assert sorted(one["input_ids"] for pack in packed for one in pack) == documents
    assert all(one["labels"] == one["input_ids"] for pack in packed for one in pack)


@pytest.mark.parametrize("converter", ["", "  converter: text\n"])
def test_a_text_that_is_not_a_string_is_one_line_naming_dataset_row_and_key(tmp_path: Path, converter: str) -> None:
    from click.testing import CliRunner

    from dataidx.cli import cli

    write_jsonl(tmp_path / "bad.jsonl", [{"text": "fine"}, {"text": {"words": 5}}])
    write_yaml(tmp_path / "bad.yaml", f"pages:\n  path: {tmp_path / 'bad.jsonl'}\n  source: local\n{converter}")
    result = CliRunner().invoke(cli, ["build", str(tmp_path / "bad.yaml"), "-o", str(tmp_path / "bad.db"), "-q"])
    one_line_error(result, "dataset 'pages', row 1, converter", "text is a dict, not a string")
    assert not (tmp_path / "bad.db").exists()


def test_empty_texts_count_as_empty_rows_under_allow_empty(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "blank.jsonl", [{"text": ""}, {"text": None}, {"text": ""}])
    write_yaml(tmp_path / "blank.yaml", f"blank:\n  path: {tmp_path / 'blank.jsonl'}\n  source: local\n")
    with pytest.raises(SourceError, match="3 of 3 rows have no supervised turn .* set allow_empty: true"):
        build(tmp_path / "blank.yaml", tmp_path / "blank.db")
    write_yaml(tmp_path / "blank.yaml", f"blank:\n  path: {tmp_path / 'blank.jsonl'}\n  source: local\n"
               "  allow_empty: true\n")
    build(tmp_path / "blank.yaml", tmp_path / "blank.db")
    assert run_query(tmp_path / "blank.db", "SELECT rows, empty_rows FROM datasets")[1] == [(3, 3)]


def test_a_text_column_beside_another_converters_columns_is_not_trained_as_a_document(tmp_path: Path) -> None:
    # A forgotten `converter: alpaca` on rows that also carry a text column: refused naming the
    # converter the columns suggest, never trained as the text alone.
    write_jsonl(tmp_path / "d.jsonl", [{"instruction": "q", "output": "a", "text": "t"} for _ in range(3)])
    write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n")
    with pytest.raises(SourceError, match="suggest converter: alpaca"):
        build(tmp_path / "c.yaml", tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()

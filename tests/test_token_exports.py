"""``dataidx export --format``: a spec's stored tokens written as Megatron ``.bin/.idx``, OLMo-core
numpy parts and Parquet, each read back by that format's own reader (megatron-core's
IndexedDataset, ai2-olmo-core's datasets, pyarrow as Megatron-Bridge reads it) and compared, token
for token, with what DataEngine and PackedDataset serve from the same store."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.errors import UsageError
from dataidx.export import export_tokens
from dataidx.export import placements as placements_module
from dataidx.export import words as words_module
from dataidx.index import build
from dataidx.pack import pack_store
from dataidx.render import IGNORE, RenderRequest, render_store

from .helpers import engine_samples, write_jsonl

pytest.importorskip("transformers")
# megatron-core warns, on import, of GPU packages a CPU machine has no use for.
pytestmark = [pytest.mark.filterwarnings("ignore:Transformer Engine and Apex are not installed"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:megatron"),
              pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")]


def message(role: str, text: str, weight: float) -> dict:
    return {"role": role, "content": [{"type": "text", "value": text}], "loss_weight": weight}


def make(folder: Path, tokenizer: Path, *, weighted: bool = False, pairs: bool = False) -> Path:
    """A store of alpaca rows (some too long for the cutoff, so not every entry trains) and a
    chat dataset drawn twice (positions outside runs), rendered with stored tokens and packed."""
    folder.mkdir()
    write_jsonl(folder / "qa.jsonl", [{"instruction": f"question {i} " + "hello " * (i % 5), "input": "",
                                      "output": ("The answer is 42. " * (20 if i % 7 == 0 else 1)).strip()}
                                     for i in range(60)])
    write_jsonl(folder / "chat.jsonl", [{"conversations": [
        {"from": "human", "value": f"hello {i}"}, {"from": "gpt", "value": "I am fine, thanks."},
        {"from": "human", "value": "how are you?"}, {"from": "gpt", "value": "The answer is 42."}]} for i in range(20)])
    config = (f"qa:\n  path: {folder / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n"
              f"chat:\n  path: {folder / 'chat.jsonl'}\n  source: local\n  converter: sharegpt\n  weight: 2\n")
    if weighted:
        write_jsonl(folder / "v1.jsonl", [{"messages": [message("system", "Be brief.", 0.25),
                                                        message("user", f"question {i}", 0.0),
                                                        message("assistant", "The answer is 42.", 0.5)]}
                                          for i in range(10)])
        config += f"v1:\n  path: {folder / 'v1.jsonl'}\n  source: local\n"
    if pairs:
        write_jsonl(folder / "pair.jsonl", [{"chosen": [{"role": "user", "content": f"q {i}"},
                                                        {"role": "assistant", "content": "yes"}],
                                             "rejected": [{"role": "user", "content": f"q {i}"},
                                                          {"role": "assistant", "content": "no"}]} for i in range(4)])
        config += f"pair:\n  path: {folder / 'pair.jsonl'}\n  source: local\n  converter: pair\n"
    (folder / "config.yaml").write_text(config)
    store = folder / "store.db"
    build(folder / "config.yaml", store)
    render_store(RenderRequest(store, tokenizer, cutoff=48, truncation="drop", jobs=1, store_tokens=True))
    if not pairs:  # a preference mixture is batched padded, never packed
        pack_store(store, "default", capacity=64)
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    return make(tmp_path_factory.mktemp("exports") / "plain", tiny_tokenizer)


@pytest.fixture(scope="module")
def weighted(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    return make(tmp_path_factory.mktemp("exports") / "weighted", tiny_tokenizer, weighted=True)


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory, wide_tokenizer: Path) -> Path:
    """Stored in 32-bit words: a vocabulary past 2^15 ids."""
    return make(tmp_path_factory.mktemp("exports") / "wide", wide_tokenizer)


def served(store: Path) -> list[dict]:
    samples = engine_samples(store, render="default")
    assert len(samples) > 60 and any(s["_dataset_name"] == "chat" for s in samples)
    return samples


def packs(store: Path) -> list[list[dict]]:
    from dataidx import PackedDataset

    with PackedDataset(store) as dataset:
        return [dataset[i] for i in range(len(dataset))]


def indexed(prefix: Path):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    return IndexedDataset(str(prefix), multimodal=False, mmap=True)


@pytest.mark.parametrize("fixture", ["store", "weighted",
                                     pytest.param("wide", marks=pytest.mark.slow)])  # 33,000 added tokens: slow to load
def test_megatron_datasets_read_back_as_data_engine_serves(fixture: str, request, tmp_path: Path) -> None:
    store = request.getfixturevalue(fixture)
    summary = export_tokens(store, tmp_path / "out", format="megatron", spec="default")
    expected = served(store)
    assert summary.documents == summary.sequences == len(expected)
    datasets = {name: indexed(tmp_path / "out" / f"data_{name}_document")
                for name in ("text", "labels", "loss_mask", "loss_weights")}
    for dataset in datasets.values():
        assert len(dataset) == len(expected) and dataset.document_indices.tolist() == list(range(len(expected) + 1))
    ids = np.int32 if fixture == "wide" else np.uint16  # Megatron has no uint32: 32-bit words export as int32
    assert datasets["text"].index.dtype == ids and datasets["loss_weights"].index.dtype == np.float32
    for i, sample in enumerate(expected):
        assert datasets["text"][i].tolist() == sample["input_ids"]
        assert datasets["labels"][i].tolist() == sample["labels"]
        assert datasets["loss_mask"][i].tolist() == [int(label != IGNORE) for label in sample["labels"]]
        assert datasets["loss_weights"][i].tolist() == np.float32(sample["loss_weights"]).tolist()
    if fixture == "weighted":
        assert 0.25 in datasets["loss_weights"][len(expected) - 1].tolist() or any(
            0.5 in datasets["loss_weights"][i].tolist() for i in range(len(expected)))


def test_megatron_files_are_byte_for_byte_megatron_cores_builder(store: Path, tmp_path: Path) -> None:
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    export_tokens(store, tmp_path / "out", format="megatron", plan="default")
    for name, key, dtype in (("text", "input_ids", np.uint16), ("labels", "labels", np.int32)):
        builder = IndexedDatasetBuilder(str(tmp_path / f"{name}.bin"), dtype=dtype)
        for pack in packs(store):
            for member in pack:
                builder.add_item(torch.tensor(member[key]))
            builder.end_document()
        builder.finalize(str(tmp_path / f"{name}.idx"))
        for suffix in ("bin", "idx"):
            assert ((tmp_path / "out" / f"data_{name}_document.{suffix}").read_bytes()
                    == (tmp_path / f"{name}.{suffix}").read_bytes()), (name, suffix)


def test_megatron_under_a_plan_is_a_document_of_sequences_per_pack(store: Path, tmp_path: Path) -> None:
    export_tokens(store, tmp_path / "out", format="megatron", plan="default")
    text = indexed(tmp_path / "out" / "data_text_document")
    expected = packs(store)
    assert text.document_indices.tolist() == np.cumsum([0] + [len(pack) for pack in expected]).tolist()
    flat = [member["input_ids"] for pack in expected for member in pack]
    assert [text[i].tolist() for i in range(len(text))] == flat


def olmo_documents(folder: Path, dtype: type) -> list[tuple[list[int], list[bool]]]:
    """Every document, in order, as OLMo-core reads its boundaries from the csv.gz files."""
    from olmo_core.data.utils import iter_document_indices

    found = []
    for part in sorted(folder.glob("token_ids_part_*.npy")):
        ids = np.fromfile(part, dtype=dtype)
        mask = np.fromfile(str(part).replace("token_ids", "labels_mask"), dtype=np.bool_)
        for start, end in iter_document_indices(str(part), use_array_if_local=False, dtype=dtype):
            found.append((ids[start:end].tolist(), mask[start:end].tolist()))
    return found


def test_olmo_parts_read_back_by_olmo_core_as_data_engine_serves(store: Path, tmp_path: Path) -> None:
    from olmo_core.data import LongDocStrategy, NumpyPackedFSLDatasetConfig, TokenizerConfig

    out = tmp_path / "out"
    summary = export_tokens(store, out, format="olmo", spec="default", part_tokens=500)
    expected = [(s["input_ids"], [label != IGNORE for label in s["labels"]]) for s in served(store)]
    parts = sorted(out.glob("token_ids_part_*.npy"))
    assert len(parts) > 2 and summary.ids_dtype == "uint16"
    assert all(path.stat().st_size <= 1000 for path in parts)  # 500 tokens of 2 bytes; no entry is longer
    assert olmo_documents(out, np.uint16) == expected
    with gzip.open(str(parts[1]).replace(".npy", ".csv.gz"), "rt") as lines:
        assert lines.readline().startswith("0,")  # relative to its part: no entry crosses a part
    config = NumpyPackedFSLDatasetConfig(
        tokenizer=TokenizerConfig(vocab_size=400, eos_token_id=2, pad_token_id=0), work_dir=str(tmp_path / "work"),
        paths=[str(out / "token_ids_part_*.npy")], expand_glob=True,
        label_mask_paths=[str(out / "labels_mask_part_*.npy")], generate_doc_lengths=True,
        long_doc_strategy=LongDocStrategy.truncate, sequence_length=64, use_array_if_local=False)
    dataset = config.build()
    dataset.prepare()
    seen = []
    for i in range(len(dataset)):
        item = dataset[i]
        offset = 0
        for length in item["doc_lens"].tolist():
            seen.append((item["input_ids"][offset:offset + length].tolist(),
                         item["label_mask"][offset:offset + length].tolist()))
            offset += length
    padding = [document for document in seen if set(document[0]) == {0}]  # pad_token_id 0 fills an instance's end
    assert sorted(document for document in seen if document not in padding) == sorted(expected)


def test_olmo_refuses_weights_its_boolean_mask_cannot_carry(weighted: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"training entry \d+ has loss weights .* OLMo-core's label mask is boolean"):
        export_tokens(weighted, tmp_path / "out", format="olmo", spec="default")
    assert list(tmp_path.iterdir()) == []  # no folder, and no temporary one


def test_parquet_rows_are_data_engine_entries(weighted: Path, tmp_path: Path) -> None:
    export_tokens(weighted, tmp_path / "out", format="parquet", spec="default")
    table = pq.read_table(tmp_path / "out" / "data.parquet")
    expected = served(weighted)
    assert table.column("input_ids").to_pylist() == [s["input_ids"] for s in expected]
    assert table.column("labels").to_pylist() == [s["labels"] for s in expected]
    assert table.column("loss_weights").to_pylist() == [np.float32(s["loss_weights"]).tolist() for s in expected]


def test_parquet_packs_read_as_megatron_bridge_reads_them(store: Path, tmp_path: Path) -> None:
    """As megatron/bridge/data/packing/parquet.py's GPTSFTPackedParquetDataset.__getitem__ reads a
    row and GPTSFTPackedDataset.collate_fn slices it (the package needs Python 3.12 and a GPU stack)."""
    export_tokens(store, tmp_path / "out", format="parquet", plan="default")
    path = tmp_path / "out" / "data.idx.parquet"
    assert {"input_ids", "seq_start_id", "loss_mask"} <= set(pq.read_schema(path).names)  # REQUIRED_COLUMNS
    file = pq.ParquetFile(path)
    rows = []
    for group in range(file.num_row_groups):
        table = file.read_row_group(group, columns=["input_ids", "seq_start_id", "loss_mask", "labels"])
        rows += table.to_pylist()
    expected = packs(store)
    assert len(rows) == len(expected)
    for row, pack in zip(rows, expected):
        boundaries = row["seq_start_id"] + [len(row["input_ids"])]
        assert len(boundaries) - 1 == len(pack)
        for (start, end), member in zip(zip(boundaries, boundaries[1:]), pack):
            ids, mask = row["input_ids"], row["loss_mask"]
            assert ids[start:end - 1] == member["input_ids"][:-1] and ids[start + 1:end] == member["input_ids"][1:]
            assert mask[start:end - 1] == [int(label != IGNORE) for label in member["labels"][1:]]
            assert mask[end - 1] == 0
        assert row["labels"] == [label for member in pack for label in member["labels"]]


def test_small_chunks_write_the_same_files(store: Path, tmp_path: Path, monkeypatch) -> None:
    for format_ in ("megatron", "olmo", "parquet"):
        export_tokens(store, tmp_path / f"{format_}-whole", format=format_, spec="default")
    monkeypatch.setattr(placements_module, "ENTRIES_PER_QUERY", 7)
    monkeypatch.setattr(words_module, "TOKENS_PER_CHUNK", 50)
    monkeypatch.setattr(placements_module.MixtureWords.chunks, "__defaults__", (7,))
    monkeypatch.setattr(words_module.decoded, "__defaults__", (50,))
    for format_ in ("megatron", "olmo"):
        export_tokens(store, tmp_path / f"{format_}-chunked", format=format_, spec="default")
        whole, chunked = tmp_path / f"{format_}-whole", tmp_path / f"{format_}-chunked"
        names = sorted(p.name for p in whole.iterdir() if p.suffix != ".json")
        assert names == sorted(p.name for p in chunked.iterdir() if p.suffix != ".json")
        for name in names:
            if name.endswith(".gz"):
                assert gzip.open(whole / name).read() == gzip.open(chunked / name).read(), name
            else:
                assert (whole / name).read_bytes() == (chunked / name).read_bytes(), name
    export_tokens(store, tmp_path / "parquet-chunked", format="parquet", spec="default")
    assert (pq.read_table(tmp_path / "parquet-whole" / "data.parquet")
            .equals(pq.read_table(tmp_path / "parquet-chunked" / "data.parquet")))


def test_a_spec_without_stored_tokens_is_refused_with_the_fix(tmp_path: Path, tiny_tokenizer: Path) -> None:
    write_jsonl(tmp_path / "qa.jsonl", [{"instruction": "q", "input": "", "output": "a"}])
    (tmp_path / "c.yaml").write_text(f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "c.yaml", tmp_path / "s.db")
    render_store(RenderRequest(tmp_path / "s.db", tiny_tokenizer, cutoff=48, jobs=1, name="lengths"))
    result = CliRunner().invoke(cli, ["export", str(tmp_path / "s.db"), "--spec", "lengths", "--format", "megatron",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    line, = result.output.strip().splitlines()
    assert "render spec 'lengths' has no stored tokens" in line and "--name lengths --store-tokens" in line


def test_pairs_and_bad_options_are_refused_in_one_line(tmp_path: Path, tiny_tokenizer: Path, store: Path) -> None:
    paired = make(tmp_path / "pairs", tiny_tokenizer, pairs=True)
    runner = CliRunner()
    cases = {
        (paired, "--spec", "default", "--format", "parquet"): "is a preference pair; token formats hold SFT sequences",
        (store, "--plan", "default", "--format", "olmo"): "OLMo-core packs documents itself",
        (store, "--spec", "default"): "add --format megatron, olmo or parquet",
        (store, "--plan", "default", "--spec", "other", "--format", "megatron"): "plan 'default' packs spec 'default'",
        (store, "--spec", "default", "--format", "megatron", "--epoch", "3"): "epoch",
    }
    for (where, *options), words in cases.items():
        result = runner.invoke(cli, ["export", str(where), *options, "-o", str(tmp_path / "out")])
        assert result.exit_code == 1 and words in result.output, (options, result.output)
        assert len(result.output.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_an_existing_folder_is_replaced_only_with_force(store: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not empty; refusing to overwrite it"):
        export_tokens(store, tmp_path / "out", format="parquet", spec="default")
    export_tokens(store, tmp_path / "out", format="parquet", spec="default", force=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["data.parquet", "dataidx_export.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(UsageError, match="holds the store"):
        export_tokens(store, store.parent, format="parquet", spec="default", force=True)


def test_a_full_disk_mid_export_leaves_no_folder_and_says_so_in_one_line(store: Path, tmp_path: Path,
                                                                         monkeypatch) -> None:
    import errno

    from dataidx.export import megatron

    calls = iter(range(100))
    original = megatron.MegatronWriter.write

    def filling(self, words) -> None:
        if next(calls) == 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, words)

    monkeypatch.setattr(megatron.MegatronWriter, "write", filling)
    result = CliRunner().invoke(cli, ["export", str(store), "--spec", "default", "--format", "megatron",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "cannot write the export: No space left on device" in result.output
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary


def test_the_cli_offers_the_registered_formats_each_a_token_writer_of_its_name() -> None:
    from dataidx.cli.export_commands import export
    from dataidx.export.formats import FORMATS, writer_for
    from dataidx.export.writer import TokenWriter

    assert FORMATS == ("megatron", "olmo", "parquet")
    for name in FORMATS:
        assert issubclass(writer_for(name), TokenWriter) and writer_for(name).format == name
    option = next(param for param in export.params if param.name == "format_")
    assert tuple(option.type.choices) == FORMATS
    with pytest.raises(UsageError, match=r"unknown token export format 'csv' \(known: megatron, olmo, parquet\)"):
        writer_for("csv")


def test_a_format_is_its_encoding_alone(store: Path, tmp_path: Path) -> None:
    # What a new format writes: the base counts, sizes, summarises, and removes its scratch files.
    from dataidx.export.writer import Shape, TokenWriter

    class Ids(TokenWriter):
        format, ids_dtype = "ids", np.dtype(np.uint16)

        def __init__(self, folder: Path, shape: Shape) -> None:
            super().__init__(folder, shape)
            self.ids, self.scratch = self.create("ids.bin"), self.spool(".scratch")

        def encode(self, words: words_module.Words) -> None:
            self.ids.write(words.ids.astype(np.uint16).tobytes())

    ids = np.arange(10, dtype=np.uint16)
    words = words_module.Words(0, ids, ids % 2 == 1, np.ones(10, np.float32), np.array([4, 6]), np.array([1, 1]),
                               None)
    shape = Shape(store=str(store), spec="default", what="ten ids", word_bytes=2, packed=False)
    with Ids.into(tmp_path / "out", shape) as writer:
        writer.write(words)
        summary = writer.finish(0.0)
    assert (summary.documents, summary.sequences, summary.tokens, summary.bytes) == (2, 2, 10, 20)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dataidx_export.json", "ids.bin"]
    with pytest.raises(ValueError, match="mid-write"), Ids.into(tmp_path / "failed", shape) as writer:
        writer.write(words)
        raise ValueError("mid-write")
    assert writer.ids.closed and sorted(p.name for p in tmp_path.iterdir()) == ["out"]

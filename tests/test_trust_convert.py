"""Issue 50 (trust, round 3), converters at build: columns that carry meaning and that the
converter would ignore, a malformed media column or message content, and a lone surrogate in
a JSON source are each one line naming what is wrong, never a quiet build of something else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx import DataEngine, register_converter
from dataidx.cli import cli
from dataidx.errors import ConfigError, SourceError
from dataidx.index import build
from dataidx.sources.json_surrogates import lone_surrogate

from .helpers import SHARED_DATA, examples, requires_shared, write_jsonl, write_yaml


def run(*args: object):
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def refused(result, message: str) -> None:
    """Exit 1 and ``Error: message`` as the one line of output, no traceback."""
    assert (result.exit_code, result.output) == (1, f"Error: {message}\n"), result.output


# Item 7: a preference pair or a KTO label the converter would not read.

@requires_shared
def test_llamafactorys_dpo_demo_under_sharegpt_is_refused_naming_its_pair_and_that_no_converter_takes_it(
        tmp_path: Path) -> None:
    """dpo_en_demo.json holds a sharegpt prompt and one {from, value} answer per side: v0's ranking
    shape, which pair does not take either. It built with exit 0 and trained neither answer."""
    demo = SHARED_DATA / "dpo_en_demo.json"
    config = write_yaml(tmp_path / "dpo.yaml", f"dpo:\n  path: {demo}\n  source: local\n  converter: sharegpt\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"),
            "dataset 'dpo': columns chosen, rejected (a preference pair) would be ignored under converter "
            "'sharegpt', which trains the rows without their pair; no converter takes these rows yet: conversations "
            "beside single chosen and rejected answers is LLaMA-Factory v0's ranking shape, and converter pair needs "
            "chosen and rejected as lists of {role, content} messages, the prompt included; if ignoring them is "
            "meant, set ignore_columns: [chosen, rejected]")
    assert not (tmp_path / "s.db").exists()
    write_yaml(tmp_path / "pair.yaml", f"dpo:\n  path: {demo}\n  source: local\n  converter: pair\n")
    refused(run("build", tmp_path / "pair.yaml", "-o", tmp_path / "s.db", "-q"),
            "dataset 'dpo', row 0, converter 'pair': chosen and rejected are single messages: ranking data in "
            "LLaMA-Factory v0's shape (single answers); v1's pair converter needs each side as a list of "
            '{role, content} messages, the prompt included (e.g. chosen: [{"role": "user", "content": "<prompt>"}, '
            '{"role": "assistant", "content": "<answer>"}])')
    config.write_text(config.read_text() + "  ignore_columns: [chosen, rejected]\n")  # the prompts' turns, on purpose
    assert build(config, tmp_path / "s.db").datasets[0].rows == 300


@requires_shared
def test_llamafactorys_kto_demo_under_openai_is_refused_naming_its_label(tmp_path: Path) -> None:
    """kto_en_demo.json's 150 answers labelled false trained as targets under openai."""
    demo = SHARED_DATA / "kto_en_demo.json"
    config = write_yaml(tmp_path / "kto.yaml", f"kto:\n  path: {demo}\n  source: local\n  converter: openai\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"),
            "dataset 'kto': column label (a KTO label) would be ignored under converter 'openai', which trains every "
            "answer, those labelled false too; converter kto takes these rows (their label becomes v1's extra_info); "
            "if ignoring it is meant, set ignore_columns: [label]")
    config.write_text(config.read_text() + "  ignore_columns: [label]\n")
    built = build(config, tmp_path / "s.db")
    assert built.datasets[0].rows == 300
    assert json.loads(run("query", tmp_path / "s.db", "SELECT info FROM datasets", "--json").output)[0]["info"] \
        == json.dumps({"path": str(demo), "source": "local", "split": "train", "converter": "openai", "size": None,
                       "weight": None, "streaming": False, "on_error": "raise", "columns": None,
                       "ignore_columns": ["label"]})


def test_pair_columns_of_v1s_shape_under_another_converter_suggest_pair(tmp_path: Path) -> None:
    """HuggingFaceH4-style rows: messages beside chosen and rejected message lists."""
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}]
    rejected = [messages[0], {"role": "assistant", "content": "bad"}]
    rows = [{"messages": messages, "chosen": messages, "rejected": rejected}]
    data = write_jsonl(tmp_path / "prefs.jsonl", rows * 3)
    for converter, under in (("openai", "under converter 'openai'"), (None, "with no converter")):
        line = f"  converter: {converter}\n" if converter else ""
        config = write_yaml(tmp_path / "c.yaml", f"prefs:\n  path: {data}\n  source: local\n{line}")
        with pytest.raises(SourceError) as refusal:
            build(config, tmp_path / "s.db")
        assert str(refusal.value) == (
            f"dataset 'prefs': columns chosen, rejected (a preference pair) would be ignored {under}, which trains "
            "the rows without their pair; they suggest converter: pair; if ignoring them is meant, set "
            "ignore_columns: [chosen, rejected]")
    config = write_yaml(tmp_path / "c.yaml", f"prefs:\n  path: {data}\n  source: local\n  converter: pair\n")
    with DataEngine(build(config, tmp_path / "s.db").store) as engine:
        assert [m["content"][0]["value"] for m in engine[0]["rejected_messages"]] == ["q", "bad"]


def test_a_renamed_column_is_checked_under_the_name_the_converter_sees(tmp_path: Path) -> None:
    rows = [{"instruction": "q", "output": "a", "verdict": False}] * 2
    data = write_jsonl(tmp_path / "a.jsonl", rows)
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n"
                                             "  columns: {label: verdict}\n")
    with pytest.raises(SourceError, match=r"^dataset 'a': column label \(a KTO label\) would be ignored"):
        build(config, tmp_path / "s.db")
    config.write_text(config.read_text().replace("  columns: {label: verdict}\n", ""))  # 'verdict' means nothing
    assert build(config, tmp_path / "s.db").datasets[0].entries == 2


def test_a_users_converter_reads_what_it_was_written_to_read(tmp_path: Path) -> None:
    @register_converter("test_kto_as_sft", version="1")
    def kto_as_sft(row):
        keep = 1.0 if row["label"] else 0.0
        return {"messages": [
            {"role": "user", "content": [{"type": "text", "value": row["q"]}], "loss_weight": 0.0},
            {"role": "assistant", "content": [{"type": "text", "value": row["a"]}], "loss_weight": keep},
        ]}

    data = write_jsonl(tmp_path / "k.jsonl", [{"q": "q", "a": "a", "label": label} for label in (True, False, True)])
    config = write_yaml(tmp_path / "c.yaml", f"k:\n  path: {data}\n  source: local\n  converter: test_kto_as_sft\n")
    assert build(config, tmp_path / "s.db").datasets[0].empty == 1


@pytest.mark.parametrize("value", ["label", [""], [1], {"label": True}])
def test_ignore_columns_must_be_a_list_of_names(tmp_path: Path, value: object) -> None:
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: a.jsonl\n  ignore_columns: {json.dumps(value)}\n")
    with pytest.raises(ConfigError) as refusal:
        build(config, tmp_path / "s.db")
    assert str(refusal.value).endswith(
        "1 problem: dataset 'a': key 'ignore_columns' must be a list of column names the converter is meant to "
        f"ignore (e.g. [label]), got {value!r}")


# Item 16: a malformed media column, and rows of another shape given no converter.

def _openai_rows(images: object) -> list[dict]:
    messages = [{"role": "user", "content": "<image><image>Who are they?"}, {"role": "assistant", "content": "Us."}]
    return [{"messages": messages, "images": images}] * 2


@pytest.mark.parametrize(("images", "said"), [
    (5, "column 'images' is an int (5), not a file path (a string)"),
    (["a.jpg", None], "column 'images' item 1 is null, not a file path (a string)"),
    ({"path": "a.jpg"}, "column 'images' is a dict ({'path': 'a.jpg'}), not a file path (a string); media stored as "
                        "data (a datasets Image or Video feature) is not read: give file paths"),
], ids=["number", "null-item", "dict"])
def test_a_malformed_media_column_is_named_by_dataset_row_and_column(tmp_path: Path, images: object,
                                                                    said: str) -> None:
    """Before: 'TypeError: 'int' object is not iterable'; a null file served as an image_url of
    null; a dict's keys taken as its files (here one, 'path', for one placeholder: built)."""
    data = write_jsonl(tmp_path / "m.jsonl", _openai_rows(images))
    config = write_yaml(tmp_path / "c.yaml", f"mm:\n  path: {data}\n  source: local\n  converter: openai\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"), f"dataset 'mm', row 0, converter 'openai': {said}")


def test_images_stored_as_data_are_named_not_served_as_dicts(tmp_path: Path) -> None:
    """A hub dataset's Image feature is a {bytes, path} struct a row: it built, and engine[0]
    served the struct (its bytes too) as the image_url's value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _openai_rows([{"bytes": b"\x89PNG", "path": None}] * 2)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "m.parquet")
    config = write_yaml(tmp_path / "c.yaml", f"mm:\n  path: {tmp_path / 'm.parquet'}\n  source: local\n"
                                             "  converter: openai\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"),
            "dataset 'mm', row 0, converter 'openai': column 'images' item 0 is a dict ({'bytes': b'\\x89PNG', "
            "'path': None}), not a file path (a string); media stored as data (a datasets Image or Video feature) "
            "is not read: give file paths")


@pytest.mark.parametrize(("messages", "said"), [
    ([{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "Us."}],
     "messages 0: content is a str, not a list of {type, value} blocks; rows in the OpenAI chat shape ({role, "
     "content: str}, like LLaMA-Factory's mllm_demo.json) take converter: openai"),
    ([{"role": "user", "content": ["Who?"]}, {"role": "assistant", "content": ["Us."]}],
     "messages 0: content is a list of str, not a list of {type, value} blocks"),
    (["Who?", "Us."], "messages 0 is a str, not a {role, content} message"),
], ids=["text-content", "list-of-text", "text-messages"])
def test_rows_not_in_the_standard_shape_with_no_converter_are_refused_naming_the_message(
        tmp_path: Path, messages: list, said: str) -> None:
    """mllm_demo.json given no converter built, then rendered every entry as a render_error
    'AttributeError: 'str' object has no attribute 'get''; text messages failed the build the
    same way."""
    data = write_jsonl(tmp_path / "m.jsonl", [{"messages": messages, "images": ["a.jpg"]}] * 2)
    config = write_yaml(tmp_path / "c.yaml", f"mm:\n  path: {data}\n  source: local\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"), f"dataset 'mm', row 0, converter 'none': {said}")


@requires_shared
def test_llamafactorys_mllm_demo_with_no_converter_names_the_converter_it_needs(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "c.yaml", f"mllm:\n  path: {SHARED_DATA / 'mllm_demo.json'}\n  source: local\n")
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"),
            "dataset 'mllm', row 0, converter 'none': messages 0: content is a str, not a list of {type, value} "
            "blocks; rows in the OpenAI chat shape ({role, content: str}, like LLaMA-Factory's mllm_demo.json) take "
            "converter: openai")


# Item 16: a lone surrogate, refused in a content block as in plain content.

LONE = "a\\ud800b"  # as JSON text: half of a UTF-16 pair, no character


def _blocks(answer: str) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "text", "value": "q"}], "loss_weight": 0.0},
                         {"role": "assistant", "content": [{"type": "text", "value": answer}], "loss_weight": 1.0}]}


@pytest.mark.parametrize(("name", "converter", "text"), [
    # v1's standard rows as a JSON array: datasets reads it with ujson, which dropped the half in silence
    ("blocks.json", None, "[\n" + json.dumps(_blocks("fine")) + ",\n" + json.dumps(_blocks("X")) + "\n]\n"),
    # content blocks of mixed shapes (a key only some messages have): read with ujson too
    ("mixed.jsonl", None, json.dumps(_blocks("fine")) + "\n" + json.dumps(_blocks("X")).replace(
        '"loss_weight": 0.0', '"loss_weight": 0.0, "name": "me"', 1) + "\n"),
    # plain content: pyarrow refused it, as "Trailing data at position 43 <- JSON parse error: ..."
    ("plain.jsonl", "alpaca", json.dumps({"instruction": "q", "output": "fine"}) + "\n"
     + json.dumps({"instruction": "q", "output": "X"}) + "\n"),
], ids=["json-array", "mixed-shapes", "plain-content"])
def test_a_lone_surrogate_in_a_content_block_is_refused_as_in_plain_content(tmp_path: Path, name: str,
                                                                           converter: str | None, text: str) -> None:
    data = tmp_path / name
    data.write_text(text.replace("X", LONE))
    line = f"  converter: {converter}\n" if converter else ""
    config = write_yaml(tmp_path / "c.yaml", f"d:\n  path: {data}\n  source: local\n{line}")
    where = 3 if name.endswith(".json") else 2
    refused(run("build", config, "-o", tmp_path / "s.db", "-q"),
            f"dataset 'd': {data}: line {where}: \\ud800 is half of a UTF-16 surrogate pair without its other half, "
            "not a character; write the character itself, or both halves of its pair")
    data.write_text(text.replace("X", "a\\ud83d\\ude00b \\\\ud800"))  # a whole pair, and the text \ud800: built
    with DataEngine(build(config, tmp_path / "s.db").store) as engine:
        assert engine[-1]["messages"][-1]["content"][0]["value"] == "a\U0001f600b \\ud800"


_PIECES = st.lists(st.sampled_from(["a", "\\", "\"", "\n", "é", "\ud800", "\udbff", "\udc00", "\U0001f600", "\u00e9"]),
                   max_size=8).map("".join)


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(st.lists(_PIECES, max_size=3), min_size=1, max_size=5),
       block=st.sampled_from([1, 2, 5, 7, 11, 64, 1 << 16]))
def test_the_lone_surrogate_found_is_the_first_json_decodes(tmp_path_factory, values: list[list[str]],
                                                            block: int) -> None:
    """Written as json.dumps writes text (every surrogate half escaped, pairs as two escapes,
    backslashes doubled), read back by json.loads: a line whose strings hold a lone half is found,
    whatever the block size, and no other."""
    path = tmp_path_factory.mktemp("surrogates") / "v.jsonl"
    written = [json.dumps({"text": value}) for value in values]  # two halves side by side: a pair
    path.write_text("".join(line + "\n" for line in written), encoding="ascii")
    lines = [number for number, line in enumerate(written, 1)
             if any("\ud800" <= character <= "\udfff" for text in json.loads(line)["text"] for character in text)]
    found = lone_surrogate(str(path), block_size=block)
    assert (found[0] if found else None) == (lines[0] if lines else None)

"""Exact-duplicate digests: the vectorised paths hash what the converted samples hash, on random
rows; a build groups exact copies (across formats too), never a prompt with another answer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dataidx.convert import (
    NO_CUT,
    SamplePrints,
    collecting_drops,
    converters,
    sample_digests,
    table_digests,
    table_prints,
)
from dataidx.convert.text_prints import text_prints
from dataidx.index import build
from dataidx.index import datasets as datasets_module
from dataidx.store import run_query

from .helpers import write_jsonl, write_yaml
from .test_vectorised import SETTINGS, alpaca_row, sharegpt_row, standard_row, table_of, text_row

SPACED = st.sampled_from(["  hi ", "hi", "\thi\n", "\u2003hi", "Hi", "h i"])


def check(name: str, rows: list[dict]) -> str:
    """Assert the table's digests equal the converted samples'; which path answered."""
    table = table_of(rows)
    if table is None:
        return "unreadable"
    plugin = converters.get(name)
    found = plugin.fast(table)
    if found is None:
        return "row"
    with collecting_drops():
        samples = [(plugin.func(raw), [None if cut == NO_CUT else cut for cut in found.cuts[found.rows == number]])
                   for number, raw in enumerate(table.to_pylist())]
    prints, expected_prints = table_prints(name, table, found), SamplePrints()
    for sample, cuts in samples:
        expected_prints.add(sample, cuts)
    if prints is not None:
        want = expected_prints.result()
        assert prints.messages.tolist() == want.messages.tolist()
        assert prints.has_prompt.tolist() == want.has_prompt.tolist()
        assert prints.prompts.tolist() == want.prompts.tolist()
    vectorised = table_digests(name, table, found)
    if vectorised is None:
        return "samples" if prints is None else "prints"
    expected = sample_digests(samples)
    assert vectorised.messages.tobytes() == expected.messages.tobytes()
    assert vectorised.has_prompt.tolist() == expected.has_prompt.tolist()
    assert vectorised.prompts.tobytes() == expected.prompts.tobytes()
    return "table"


@SETTINGS
@given(st.lists(alpaca_row, min_size=1, max_size=12))
def test_alpaca_digests_equal_the_samples(rows: list[dict]) -> None:
    assume(check("alpaca", rows) not in ("unreadable", "row"))


@SETTINGS
@given(st.lists(sharegpt_row, min_size=1, max_size=6))
def test_sharegpt_digests_equal_the_samples(rows: list[dict]) -> None:
    assume(check("sharegpt", rows) not in ("unreadable", "row"))


@SETTINGS
@given(st.lists(standard_row, min_size=1, max_size=12))
def test_standard_digests_equal_the_samples(rows: list[dict]) -> None:
    assume(check("none", rows) not in ("unreadable", "row"))


@SETTINGS
@given(st.lists(text_row, min_size=1, max_size=12), st.sampled_from(["text", "none"]))
def test_document_digests_equal_the_samples(rows: list[dict], name: str) -> None:
    assume(check(name, rows) not in ("unreadable", "row"))


@SETTINGS
@given(st.lists(st.fixed_dictionaries({"instruction": SPACED, "output": SPACED}), min_size=1, max_size=8))
def test_surrounding_ascii_whitespace_is_all_that_is_normalized(rows: list[dict]) -> None:
    assert check("alpaca", rows) == "table"


def test_a_build_groups_exact_copies_across_formats_and_never_a_prompt_with_another_answer(tmp_path: Path) -> None:
    alpaca = [
        {"instruction": "Name a colour.", "output": "Blue."},  # 0: the representative
        {"instruction": "Name a fruit.", "output": "A pear."},  # 1
        {"instruction": "Name a colour.", "output": "Blue."},  # 2: a copy
        {"instruction": "  Name a colour.\n", "output": "Blue. "},  # 3: a copy once trimmed
        {"instruction": "Name a colour.", "output": "Red."},  # 4: the same prompt, another answer
        {"instruction": "name a colour.", "output": "Blue."},  # 5: another case: near, not exact
        {"system": "Be brief.", "instruction": "Name a colour.", "output": "Blue."},  # 6: another system prompt
    ]
    sharegpt = [
        {"conversations": [{"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "Blue."}]},
        {"conversations": [{"from": "human", "value": "Name a fruit."}, {"from": "gpt", "value": "A pear."},
                           {"from": "human", "value": "Another?"}, {"from": "gpt", "value": "A fig."}]},
    ]
    write_jsonl(tmp_path / "a.jsonl", alpaca)
    write_jsonl(tmp_path / "s.jsonl", sharegpt)
    write_yaml(tmp_path / "d.yaml", f"a:\n  path: {tmp_path / 'a.jsonl'}\n  source: local\n  converter: alpaca\n"
                                    f"s:\n  path: {tmp_path / 's.jsonl'}\n  source: local\n  converter: sharegpt\n")
    build(tmp_path / "d.yaml", tmp_path / "d.db")
    _, groups = run_query(tmp_path / "d.db", "SELECT dataset, row, cut, copies, representative_dataset, "
                          "representative_row FROM exact_duplicates ORDER BY digest, entry_id")
    by_representative: dict[tuple[str, int], list[tuple[str, int, int | None]]] = {}
    for dataset, row, cut, copies, representative_dataset, representative_row in groups:
        by_representative.setdefault((representative_dataset, representative_row), []).append((dataset, row, cut))
        assert copies == len([g for g in groups if g[4:] == (representative_dataset, representative_row)])
    assert by_representative == {("a", 0): [("a", 0, 2), ("a", 2, 2), ("a", 3, 2), ("s", 0, 2)],
                                 ("a", 1): [("a", 1, 2), ("s", 1, 2)]}  # a conversation's first turn is an entry
    _, prompts = run_query(tmp_path / "d.db", "SELECT dataset, row, entries, answers FROM same_prompts "
                           "ORDER BY entry_id")
    assert prompts == [("a", 0, 5, 2), ("a", 1, 2, 1), ("a", 2, 5, 2), ("a", 3, 5, 2), ("a", 4, 5, 2),
                       ("s", 0, 5, 2), ("s", 1, 2, 1)]


def test_digests_are_the_same_however_the_build_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"instruction": f"q{i % 7}", "output": f"a{i % 5}"} for i in range(60)]
    write_jsonl(tmp_path / "a.jsonl", rows)
    write_yaml(tmp_path / "d.yaml", f"a:\n  path: {tmp_path / 'a.jsonl'}\n  source: local\n  converter: alpaca\n")
    build(tmp_path / "d.yaml", tmp_path / "whole.db")
    monkeypatch.setattr(datasets_module, "CHUNK_ROWS", 8)
    build(tmp_path / "d.yaml", tmp_path / "chunked.db")
    query = "SELECT entry_id, messages, prompt FROM entry_digests ORDER BY entry_id"
    whole = run_query(tmp_path / "whole.db", query)[1]
    assert whole == run_query(tmp_path / "chunked.db", query)[1]
    assert len(whole) == 60  # every row shares its prompt (7 prompts) and its messages (35 pairs) with another


def test_a_text_has_one_fingerprint_wherever_its_bytes_lie() -> None:
    text = "The quick brown fox jumps over the lazy dog, twice over."
    prints = {int(text_prints(pa.array(["x" * shift, text]))[1]) for shift in range(17)}
    spaced = text_prints(pa.array([" " * 40 + text + "\n" * 30, "\t" + text, "\u2003" + text]))
    assert len(prints) == 1 and int(spaced[0]) == int(spaced[1]) == prints.pop() != int(spaced[2])


def _write(folder: Path, datasets: dict[str, tuple[str, list[dict]]]) -> Path:
    config = ""
    for name, (converter, rows) in datasets.items():
        write_jsonl(folder / f"{name}.jsonl", rows)
        config += f"{name}:\n  path: {folder / f'{name}.jsonl'}\n  source: local\n  converter: {converter}\n"
    write_yaml(folder / "d.yaml", config)
    build(folder / "d.yaml", folder / "d.db")
    return folder / "d.db"


def test_a_fingerprint_that_meets_another_is_hashed_and_dropped_when_the_messages_differ(tmp_path: Path) -> None:
    # One length, one first, middle and last word: one fingerprint, other messages.
    first, second = ("Begin: x" + inside + "MIDDLE:)" + outside + "the end." for inside, outside in
                     (("a" * 15, "c" * 16), ("c" * 15, "a" * 16)))
    assert len(first) == len(second) and text_prints(pa.array([first]))[0] == text_prints(pa.array([second]))[0]
    rows = [{"instruction": f"q{i}", "output": f"answer {i}"} for i in range(400)]
    rows[10], rows[20] = {"instruction": "same", "output": first}, {"instruction": "same", "output": second}
    table = table_of(rows[10:30:10])
    assert table is not None
    entries = table_prints("alpaca", table, converters.get("alpaca").fast(table))
    assert entries is not None and entries.messages[0] == entries.messages[1]  # candidates, then hashed
    store = _write(tmp_path, {"a": ("alpaca", rows)})
    assert run_query(store, "SELECT row FROM exact_duplicates")[1] == []
    assert run_query(store, "SELECT row, entries, answers FROM same_prompts ORDER BY row")[1] == [(10, 2, 2),
                                                                                                  (20, 2, 2)]
    rows[30] = rows[10]
    (tmp_path / "again").mkdir()
    store = _write(tmp_path / "again", {"a": ("alpaca", rows)})
    assert run_query(store, "SELECT row, copies, representative_row FROM exact_duplicates ORDER BY row")[1] == [
        (10, 2, 10), (30, 2, 10)]


def test_rows_the_converter_converts_one_by_one_and_pairs_are_grouped_too(tmp_path: Path) -> None:
    openai = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
              {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey."}]}]
    sharegpt = [{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]}]
    side = [{"role": "user", "content": "Pick one"}, {"role": "assistant", "content": "A"}]
    pairs = [{"chosen": side, "rejected": [side[0], {"role": "assistant", "content": "B"}]}] * 2 + [
        {"chosen": side, "rejected": [side[0], {"role": "assistant", "content": "C"}]}]
    store = _write(tmp_path, {"o": ("openai", openai), "s": ("sharegpt", sharegpt), "p": ("pair", pairs)})
    assert run_query(store, "SELECT dataset, row, copies, representative_dataset FROM exact_duplicates "
                            "ORDER BY entry_id")[1] == [("o", 0, 2, "o"), ("s", 0, 2, "o"), ("p", 0, 2, "p"),
                                                        ("p", 1, 2, "p")]
    assert run_query(store, "SELECT dataset, row, entries, answers FROM same_prompts WHERE dataset = 'p' "
                            "ORDER BY entry_id")[1] == [("p", 0, 3, 2), ("p", 1, 3, 2), ("p", 2, 3, 2)]

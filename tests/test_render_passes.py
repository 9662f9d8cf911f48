"""A render pass over a range of entries (``dataidx.render.passes``): what a later issue shards
rendering on, so a range's rows must not depend on how the entries were split or where they ran."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dataidx.read import EntryReader
from dataidx.render import RenderRequest, load_tokenizer, render_store
from dataidx.render.passes import RenderPass, entry_ranges, render_range
from dataidx.render.spec import make_spec


def test_entry_ranges_are_half_open_and_cover_the_span_once() -> None:
    assert entry_ranges(1, 8, 3) == [(1, 4), (4, 7), (7, 8)]
    assert entry_ranges(5, 5, 3) == []


def test_a_pass_over_a_range_is_its_entries_rows_whatever_the_split(demo_copy: Path, tiny_tokenizer: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = load_tokenizer(tiny_tokenizer)
    _, renderer = make_spec("passes", tokenizer, tokenizer_path=tiny_tokenizer, template="chatml", cutoff=64,
                            truncation="drop")
    with EntryReader(demo_copy) as reader:
        ids = [entry[0] for entry in reader.entries_between(0, 2**62)]
        end = ids[-1] + 1
        work = RenderPass(reader, renderer)
        whole = render_range(work, ids[0], end)
        parts = [render_range(work, first, last) for first, last in entry_ranges(ids[0], end, 5)]
        empty = render_range(work, ids[3], ids[3])
        with_words = render_range(RenderPass(reader, renderer, np.dtype(np.uint16)), ids[0], end)
    assert [row[0] for row in whole.rows] == ids
    assert [row for part in parts for row in part.rows] == whole.rows
    assert sum((part.uses for part in parts), Counter()) == whole.uses
    assert empty.rows == [] and empty.tokens is None and whole.tokens is None
    assert with_words.rows == whole.rows and with_words.tokens is not None
    # What render_store's forked workers store, a few ranges each, is what the pass returned here.
    monkeypatch.setattr("dataidx.render.lengths.ENTRIES_PER_RENDER_CHUNK", 5)
    render_store(RenderRequest(demo_copy, tiny_tokenizer, template="chatml", cutoff=64, truncation="drop", jobs=2))
    with sqlite3.connect(demo_copy) as connection:
        stored = connection.execute("SELECT entry_id, tokens, supervised_tokens, full_tokens, status "
                                    "FROM entry_renders ORDER BY entry_id").fetchall()
    assert stored == [row[:5] for row in whole.rows]

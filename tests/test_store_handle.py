"""One store handle: every read goes through an object that owns one connection and is closed.

Readers open the store once per construction and give their handle back on ``close()`` or at
the end of a ``with`` block; functions handed an open handle read through it and leave it open;
read templates fill in only the names the dialect knows.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from dataidx import DataEngine, PackedDataset, StoreReader, composition, run_query, store_info
from dataidx.errors import ReadOnlyError, StoreError
from dataidx.pack import RenderedPacks, pack_store
from dataidx.render import RenderedMixture, RenderRequest, render_store
from dataidx.store import StoreHandle, open_store
from dataidx.store.handle import open_handles

from .helpers import alpaca_rows, write_jsonl


@pytest.fixture
def packed_store(tmp_path: Path, make_store, tiny_tokenizer: Path) -> Path:
    """A store of 40 alpaca rows, rendered under spec ``default`` and packed as plan ``default``."""
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(40))
    store = make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    render_store(RenderRequest(store, tiny_tokenizer, template="chatml", cutoff=256))
    pack_store(store, "default", capacity=256)
    return store


def _open_now() -> list[StoreHandle]:
    return open_handles()[0]


def test_a_template_fills_in_the_dialects_names_and_leaves_every_other_brace_as_written(
        tmp_path: Path, make_store) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    store = make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    with open_store(store) as handle:
        template = "SELECT '{\"a\": 1}', '{x}' FROM t WHERE id = {mark} AND status IN ({trains}) AND id IN ({ids})"
        assert handle.sql(template) == ("SELECT '{\"a\": 1}', '{x}' FROM t WHERE id = ? AND status IN ('ok', "
                                        "'truncated') AND id IN (SELECT value FROM json_each(?))")
        assert handle.dialect.sql("SELECT {packed} FROM t", packed="max(x)") == "SELECT max(x) FROM t"
        assert handle.one("SELECT '{\"role\": \"user\"}', count(*) FROM entries WHERE row >= {mark}", 1) == \
            ('{"role": "user"}', 2)
        assert handle in _open_now()
    assert handle.closed and handle not in _open_now()
    with pytest.raises(StoreError, match="read after the store was closed"):
        handle.all("SELECT 1")
    handle.close()  # twice is harmless


def test_each_reader_opens_the_store_once_and_close_or_with_gives_it_back(packed_store: Path) -> None:
    before = set(_open_now())
    readers = [
        lambda: StoreReader(packed_store),
        lambda: RenderedMixture(packed_store, spec="default"),
        lambda: RenderedPacks(packed_store, "default"),
        lambda: DataEngine(packed_store),
        lambda: DataEngine(packed_store, render="default"),
        lambda: PackedDataset(packed_store, "default"),
    ]
    for make in readers:
        reader = make()
        opened = set(_open_now()) - before
        assert len(opened) == 1, f"{type(reader).__name__} holds {len(opened)} handles"
        reader.close()
        assert not set(_open_now()) - before
        with pytest.raises(StoreError, match="closed"):
            reader[0] if hasattr(reader, "__getitem__") else reader.get(0)
        with make() as reader:
            assert len(set(_open_now()) - before) == 1
        assert not set(_open_now()) - before


def test_a_reader_that_fails_to_open_leaves_no_handle_open(packed_store: Path) -> None:
    before = set(_open_now())
    for make in (lambda: RenderedMixture(packed_store, spec="nope"), lambda: RenderedPacks(packed_store, "nope"),
                 lambda: StoreReader(packed_store, "nope")):
        with pytest.raises(StoreError, match="nope"):
            make()
        assert not set(_open_now()) - before


def test_functions_given_an_open_handle_read_through_it_and_leave_it_open(packed_store: Path) -> None:
    with open_store(packed_store) as handle:
        assert composition(handle, spec="default") == composition(packed_store, spec="default")
        assert store_info(handle) == store_info(packed_store)
        assert run_query(handle, "SELECT count(*) FROM entries") == (["count(*)"], [(40,)])
        with pytest.raises(ReadOnlyError):
            run_query(handle, "DELETE FROM base_entries")
        # The user's SQL ran locked down; the handle's own reads go on as before.
        assert handle.value("SELECT json_array(count(*)) FROM entries") == "[40]"
        assert not handle.closed


def test_a_reader_nobody_closed_is_open_until_the_collector_closes_it_and_then_reported(tmp_path: Path,
                                                                                        make_store) -> None:
    """What tests/conftest.py's no_store_handle_left_open checks after every test: a handle still
    open, or one the garbage collector had to close, is found and named."""
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3))
    store = make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    before = set(_open_now())
    reader = StoreReader(store)
    (left,) = set(_open_now()) - before
    assert left.name == str(store)
    del reader, left
    gc.collect()  # a reader's handle sits in a reference cycle: only the collector would close it
    still, collected = open_handles()
    assert not set(still) - before and collected == [str(store)]

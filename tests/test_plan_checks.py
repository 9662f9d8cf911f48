"""Packing plans edited after they were made: PackedDataset refuses a pack whose member rows are
not what it serves, and ``dataidx verify`` (plain and ``--tokens``) recounts every plan."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from dataidx.errors import StoreError
from dataidx.export import export_tokens
from dataidx.index import add_mixture, build
from dataidx.pack import pack_store
from dataidx.read import verify_store
from dataidx.render import RenderRequest, render_store, verify_tokens
from dataidx.training import PackedDataset

from .helpers import alpaca_rows, chat_rows, write_jsonl, write_yaml

pytest.importorskip("transformers")

CAPACITY = 160


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Path) -> Path:
    """Alpaca rows (some too long for the cutoff) and two-cut conversations drawn twice, rendered
    with stored tokens; plans 'plain', 'chains' (cuts merged) and 'twice' (a mixture of 2 epochs)."""
    folder = tmp_path_factory.mktemp("plans")
    rows = alpaca_rows(40)
    for row in rows[::9]:
        row["output"] = "a long answer " * 40  # past the cutoff: too_long
    qa = write_jsonl(folder / "qa.jsonl", rows)
    chat = write_jsonl(folder / "chat.jsonl", chat_rows([2] * 16))
    config = write_yaml(folder / "c.yaml", f"qa:\n  path: {qa}\n  source: local\n  converter: alpaca\n"
                                          f"chat:\n  path: {chat}\n  source: local\n  converter: sharegpt\n"
                                          "  weight: 2\n")
    store = folder / "plans.db"
    build(config, store)
    render_store(RenderRequest(store, tiny_tokenizer, cutoff=96, truncation="drop", jobs=1, store_tokens=True))
    add_mixture(store, config, "two", epochs=2)
    pack_store(store, "default", capacity=CAPACITY, name="plain")
    pack_store(store, "default", capacity=CAPACITY, name="chains", merge_cuts="chains")
    pack_store(store, "default", capacity=CAPACITY, mixture="two", name="twice")
    return store


def _copy(store: Path, folder: Path) -> Path:
    copy = Path(shutil.copyfile(store, folder / store.name))
    shutil.copytree(store.parent / f"{store.name}.tokens", folder / f"{store.name}.tokens")
    return copy


def _edit(store: Path, *statements: str) -> None:
    with sqlite3.connect(store) as connection:
        for statement in statements:
            assert connection.execute(statement).rowcount > 0, statement


def _plan_lines(store: Path) -> tuple[list[str], list[str]]:
    """What plain verify and verify --tokens say of plans."""
    plain = [line for line in verify_store(store)["integrity"] if line.startswith("plan '")]
    tokens = [line for report in verify_tokens(store, sample=10) for line in report.problems
              if line.startswith("plan '")]
    return plain, tokens


def _member(plan: str, where: str = "b.dataset_id = 1") -> str:
    """The first member of ``plan`` (its packed_entries id) that ``where`` holds for (by default
    one of dataset 'qa', whose entries are drawn once)."""
    return (f"(SELECT e.id FROM packed_entries AS e JOIN packing_plans AS p ON p.id = e.plan_id "
            f"JOIN base_entries AS b ON b.id = e.entry_id WHERE p.name = '{plan}' AND {where} ORDER BY e.id LIMIT 1)")


def _pack_of(store: Path, plan: str, member: str) -> int:
    with sqlite3.connect(store) as connection:
        return connection.execute(
            f"SELECT k.pack - pe.first_pack FROM packs AS k JOIN packing_plans AS p ON p.id = k.plan_id "
            f"JOIN plan_epochs AS pe ON pe.plan_id = k.plan_id AND k.pack BETWEEN pe.first_pack AND "
            f"pe.first_pack + pe.packs - 1 WHERE p.name = '{plan}' AND {member} BETWEEN k.first_member AND "
            "k.first_member + k.members - 1").fetchone()[0]


def test_plans_as_made_are_served_and_verify_clean(planned: Path) -> None:
    assert _plan_lines(planned) == ([], [])
    assert verify_store(planned)["ok"]
    for plan in ("plain", "chains", "twice"):
        with PackedDataset(planned, plan) as packs:
            assert all(packs[i] for i in range(len(packs)))


def test_a_member_dropped_by_the_join_is_refused_on_fetch_and_by_verify(planned: Path, tmp_path: Path) -> None:
    store = _copy(planned, tmp_path)
    member = _member("plain")
    pack = _pack_of(store, "plain", member)
    _edit(store, "DELETE FROM entry_renders WHERE entry_id = "
                 f"(SELECT entry_id FROM packed_entries WHERE id = {member})")
    with PackedDataset(store, "plain", verify=False) as packs, pytest.raises(
            StoreError, match=f"pack {pack} of plan 'plain' has 1 members without a length under spec 'default'"):
        packs[pack]
    with pytest.raises(StoreError, match="plan 'plain' has packs whose members are missing or do not train"):
        export_tokens(store, tmp_path / "out", format="megatron", plan="plain", verify=False)
    plain, tokens = _plan_lines(store)
    assert f"plan 'plain': 1 members have no length under spec 'default' (the first in pack {pack})" in plain
    assert any("members have no length" in line for line in tokens)


def test_a_member_row_deleted_from_its_pack_is_refused_on_fetch(planned: Path, tmp_path: Path) -> None:
    store = _copy(planned, tmp_path)
    member = _member("plain")
    pack = _pack_of(store, "plain", member)
    _edit(store, f"DELETE FROM packed_entries WHERE id = {member}")
    with PackedDataset(store, "plain", verify=False) as packs, pytest.raises(
            StoreError, match=f"pack {pack} of plan 'plain' names [0-9]+ members and [0-9]+ are there"):
        packs[pack]
    with sqlite3.connect(store) as connection:
        packs, members = connection.execute("SELECT packs, entries FROM packing_plans WHERE name = 'plain'").fetchone()
    assert _plan_lines(store) == ([f"plan 'plain': its {packs} packs name {members} members and {members - 1} are "
                                   "there (edited?)"],) * 2


def test_a_merging_plan_flipped_to_no_merging_is_refused_and_its_packs_recounted(planned: Path,
                                                                                    tmp_path: Path) -> None:
    store = _copy(planned, tmp_path)
    _edit(store, "UPDATE packing_plans SET merge_cuts = 'no' WHERE name = 'chains'")
    pack = _pack_of(store, "chains", _member("chains", "e.joined"))
    with PackedDataset(store, "chains", verify=False) as packs, pytest.raises(
            StoreError, match=f"pack {pack} of plan 'chains' joins cuts into one sequence in a plan that merges none"):
        packs[pack]
    plain, tokens = _plan_lines(store)
    assert plain == tokens and len(plain) == 3
    assert plain[0].startswith("plan 'chains': ") and "members are joined to the next in a plan that merges no cuts" \
        in plain[0]
    assert "packs record other token counts than their members make" in plain[1]
    assert f"packs hold more than the plan's capacity of {CAPACITY} tokens" in plain[2]


def test_an_entry_that_does_not_train_put_in_a_pack_is_refused_and_found(planned: Path, tmp_path: Path) -> None:
    store = _copy(planned, tmp_path)
    member = _member("plain")
    pack = _pack_of(store, "plain", member)
    _edit(store, f"UPDATE packed_entries SET entry_id = (SELECT entry_id FROM entry_renders WHERE status = 'too_long' "
                 f"LIMIT 1) WHERE id = {member}")
    with PackedDataset(store, "plain", verify=False) as packs, pytest.raises(
            StoreError, match=f"pack {pack} of plan 'plain' has 1 members that do not train under spec 'default'"):
        packs[pack]
    plain, tokens = _plan_lines(store)
    assert f"plan 'plain': 1 members do not train under spec 'default' (the first in pack {pack})" in plain
    assert f"plan 'plain': 1 members are not the entry at their position of mixture 'default' (the first in pack " \
           f"{pack})" in plain and plain == tokens


def test_a_cut_moved_to_its_sibling_trains_twice_and_verify_finds_it(planned: Path, tmp_path: Path) -> None:
    store = _copy(planned, tmp_path)
    member = _member("twice", "b.cut = 2")  # the first cut of a conversation, in epoch 0 or 1
    _edit(store, f"UPDATE packed_entries SET entry_id = entry_id + 1 WHERE id = {member}")
    with sqlite3.connect(store) as connection:
        epoch = connection.execute(
            "SELECT pe.epoch FROM packs AS k JOIN plan_epochs AS pe ON pe.plan_id = k.plan_id AND k.pack BETWEEN "
            f"pe.first_pack AND pe.first_pack + pe.packs - 1 WHERE {member} BETWEEN k.first_member AND "
            "k.first_member + k.members - 1").fetchone()[0]
    plain, tokens = _plan_lines(store)
    pack = _pack_of(store, "twice", member)
    assert f"plan 'twice': epoch {epoch}: 1 members are not the entry at their position of mixture 'two' (the first " \
           f"in pack {pack})" in plain and plain == tokens
    assert any(line.startswith(f"plan 'twice': epoch {epoch}: 1 packs record other token counts") for line in plain)

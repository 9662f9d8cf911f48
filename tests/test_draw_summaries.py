"""The draw summaries (dataset_turns, mixture_spans, repeat_counts, repeat_rows) hold what
counting the base entries and every position gives, written or migrated, and the cookbook
queries that read them answer exactly as expanding every position does: the views they read
before, and a plain count in Python over the positions."""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from dataidx.index import add_mixture
from dataidx.store import migrate_store, remove_mixture, remove_render_spec, run_query
from dataidx.store.connect import store_revision
from dataidx.store.schema import REPEAT_ROWS
from dataidx.view import COOKBOOK

from .helpers import alpaca_rows, chat_rows, downgrade_store, train_tokenizer, write_jsonl, write_yaml

#: The cookbook's questions as they were asked of the views, position by position.
BY_VIEWS = {
    "Which rows repeat most": "SELECT dataset, row, max(repeats) AS times FROM repeats\n"
                              "WHERE mixture = 'default' GROUP BY dataset, row HAVING times > 1 "
                              "ORDER BY times DESC, dataset, row LIMIT 10;",
    "Entries in one mixture that the other never uses": "SELECT dataset, row, cut FROM repeats WHERE mixture = "
                                                        "'seed7'\nEXCEPT SELECT dataset, row, cut FROM repeats "
                                                        "WHERE mixture = 'default';",
    "How many turns conversations have": "SELECT dataset, entries AS turns, count(*) AS conversations FROM turns\n"
                                         "GROUP BY dataset, entries ORDER BY dataset, turns;",
    "Why entries do not train": "SELECT spec, dataset, status, count(*) AS entries, max(full_tokens) AS longest\n"
                                "FROM entry_lengths WHERE status NOT IN ('ok') GROUP BY spec, dataset, status;",
    "Tokens and supervised tokens": "SELECT e.dataset, count(*), sum(l.tokens), sum(l.supervised_tokens) "
                                    "FROM entries AS e JOIN entry_lengths AS l ON l.dataset = e.dataset "
                                    "AND l.row = e.row AND coalesce(l.cut, -1) = coalesce(e.cut, -1) "
                                    "WHERE e.mixture = 'default' AND l.spec = 'default' "
                                    "AND l.status IN ('ok', 'truncated') GROUP BY e.dataset ORDER BY min(e.position);",
}
#: Per mixture (keyed by mixture_id first) and per render spec (spec_id first).
MIXTURE_SUMMARIES = ("mixture_spans", "repeat_counts", "repeat_rows")
SPEC_SUMMARIES = ("render_statuses", "render_blocks", "length_chunks")
SUMMARIES = ("dataset_turns", *MIXTURE_SUMMARIES, *SPEC_SUMMARIES)
MIXTURES = ("default", "grown", "drawn", "epochs", "few")


def cookbook(title: str) -> str:
    return next(sql for found, sql in COOKBOOK if found.startswith(title))


def mixture_yaml(folder: Path, *, chat: str = "", alpaca: str = "") -> str:
    """Chat rows of 1 to 6 exchanges (one entry each), alpaca rows (one entry), and one alpaca
    row the converter rejects, so that row numbers skip one; the files are written once."""
    chats, answers = folder / "chat.jsonl", folder / "alpaca.jsonl"
    if not chats.exists():
        write_jsonl(chats, chat_rows([1 + (i * 7) % 6 for i in range(700)]))
        rows = alpaca_rows(260)
        rows[5] = {"instruction": 7}
        write_jsonl(answers, rows)
    return (f"chat:\n  path: {chats}\n  source: local\n  converter: sharegpt\n{chat}"
            f"alpaca:\n  path: {answers}\n  source: local\n  converter: alpaca\n  on_error: skip\n{alpaca}")


def mixed(folder: Path) -> Path:
    """A store whose mixtures repeat entries (weights above 1), draw with replacement, keep
    scattered positions (a shrunk dataset), have three epochs, and leave a dataset out."""
    from dataidx.index import build

    store = folder / "mixed.db"
    build(write_yaml(folder / "default.yaml", mixture_yaml(folder)), store)
    for name, keywords, chat, alpaca in [
        ("grown", {}, "  weight: 2.5\n", "  size: 90\n"),
        ("drawn", {"sampling": "replacement", "seed": 3}, "  weight: 1.7\n", "  weight: 0.8\n"),
        ("epochs", {"epochs": 3, "seed": 5}, "  weight: 1.5\n", "  size: 80\n"),
        ("few", {}, "  size: 0\n", "  size: 3\n"),
    ]:
        add_mixture(store, write_yaml(folder / f"{name}.yaml", mixture_yaml(folder, chat=chat, alpaca=alpaca)), name,
                    **keywords)
    return store


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed(tmp_path_factory.mktemp("summaries"))


@pytest.fixture(scope="module")
def rendered_store(mixed_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed store under a spec whose cutoff drops the longest entries."""
    from dataidx.render import RenderRequest, render_store

    folder = tmp_path_factory.mktemp("rendered")
    store = Path(shutil.copyfile(mixed_store, folder / "rendered.db"))
    train_tokenizer(folder / "tokenizer")
    render_store(RenderRequest(store, folder / "tokenizer", template="chatml", cutoff=40, truncation="drop"))
    return store


def positions(store: Path, mixture: str) -> list[tuple[str, int, int | None]]:
    """(dataset, row, cut) of every position of every epoch, expanded."""
    _, rows = run_query(store, "SELECT dataset, row, cut FROM entries WHERE mixture = :m", {"m": mixture})
    return [tuple(row) for row in rows]


def row_times(store: Path, mixture: str) -> dict[tuple[str, int], int]:
    """How often the mixture draws each (dataset, row), counted over its expanded positions: the
    times of its most drawn entry (cut)."""
    drawn: dict[tuple[str, int], int] = {}
    for (dataset, row, _), n in Counter(positions(store, mixture)).items():
        drawn[dataset, row] = max(drawn.get((dataset, row), 0), n)
    return drawn


def levels(store: Path, table: str, column: str, mixture: str) -> list[tuple]:
    """``(dataset, times, column)`` of a mixture's repeat_counts or repeat_rows, in key order."""
    _, found = run_query(store, f"SELECT d.name, r.times, r.{column} FROM {table} AS r JOIN mixtures AS m "
                                "ON m.id = r.mixture_id JOIN datasets AS d ON d.id = r.dataset_id "
                                f"WHERE m.name = :m ORDER BY d.name, r.times, r.{column}", {"m": mixture})
    return [tuple(row) for row in found]


@pytest.mark.parametrize("mixture", MIXTURES)
def test_repeat_counts_are_the_rows_by_times_over_every_epoch(mixed_store: Path, mixture: str) -> None:
    counted = Counter((dataset, n) for (dataset, _), n in row_times(mixed_store, mixture).items())
    assert levels(mixed_store, "repeat_counts", "rows", mixture) == sorted(
        (dataset, n, rows) for (dataset, n), rows in counted.items())


@pytest.mark.parametrize("mixture", MIXTURES)
def test_repeat_rows_are_the_first_rows_of_each_level(mixed_store: Path, mixture: str) -> None:
    times = row_times(mixed_store, mixture)
    by_level: dict[tuple[str, int], list[int]] = {}
    for (dataset, row), n in sorted(times.items()):
        by_level.setdefault((dataset, n), []).append(row)
    expected = [(dataset, n, row) for (dataset, n), rows in sorted(by_level.items()) for row in rows[:REPEAT_ROWS]]
    assert levels(mixed_store, "repeat_rows", "row", mixture) == expected
    assert len(expected) < len(times) or mixture != "default"  # its 259 alpaca rows, shown once: 100 kept


@pytest.mark.parametrize("mixture", MIXTURES)
def test_mixture_spans_are_the_entries_it_uses(mixed_store: Path, mixture: str) -> None:
    _, spans = run_query(mixed_store, "SELECT s.first_entry, s.entries FROM mixture_spans AS s JOIN mixtures AS m "
                                      "ON m.id = s.mixture_id WHERE m.name = :m", {"m": mixture})
    _, used = run_query(mixed_store, "SELECT DISTINCT p.entry_id FROM mixture_positions AS p JOIN mixtures AS m "
                                     "ON m.id = p.mixture_id WHERE m.name = :m", {"m": mixture})
    covered = [entry for first, count in spans for entry in range(first, first + count)]
    assert sorted(covered) == sorted(entry for (entry,) in used) and len(set(covered)) == len(covered)


@pytest.mark.parametrize("mixture", MIXTURES)
@pytest.mark.parametrize("limit", [10, REPEAT_ROWS])
def test_rows_that_repeat_most_equal_the_positions(mixed_store: Path, mixture: str, limit: int) -> None:
    def asked(sql: str) -> list[tuple]:
        sql = sql.replace("'default'", f"'{mixture}'").replace("LIMIT 10", f"LIMIT {limit}")
        return [tuple(row) for row in run_query(mixed_store, sql)[1]]

    found = asked(cookbook("Which rows repeat most"))
    repeated = {key: n for key, n in row_times(mixed_store, mixture).items() if n > 1}
    counted = sorted(((dataset, row, n) for (dataset, row), n in repeated.items()),
                     key=lambda item: (-item[2], item[0], item[1]))[:limit]
    assert found == asked(BY_VIEWS["Which rows repeat most"]) == counted
    assert len(found) == min(limit, len(repeated)) and (found or mixture in ("default", "few"))


def test_a_conversation_drawn_once_is_not_a_row_that_repeats(mixed_store: Path) -> None:
    """A row's times are its most drawn cut's: six turns shown once each are one draw, so the
    default mixture (every entry once) has no row that repeats, and a conversation of three turns
    drawn 2 or 3 times (weight 2.5) counts 2 or 3, not up to 18."""
    assert run_query(mixed_store, cookbook("Which rows repeat most"))[1] == []
    _, levels_found = run_query(mixed_store, "SELECT r.times, sum(r.rows) FROM repeat_counts AS r JOIN mixtures AS m "
                                             "ON m.id = r.mixture_id JOIN datasets AS d ON d.id = r.dataset_id "
                                             "WHERE m.name = 'grown' AND d.name = 'chat' GROUP BY r.times")
    found = dict(tuple(row) for row in levels_found)
    assert set(found) == {2, 3} and sum(found.values()) == 700  # every row drawn 2 or 3 times


@pytest.mark.parametrize("first", MIXTURES)
@pytest.mark.parametrize("second", MIXTURES)
def test_entries_one_mixture_never_uses_equal_the_positions(mixed_store: Path, first: str, second: str) -> None:
    def asked(sql: str) -> list[tuple]:
        sql = sql.replace("'seed7'", "'first'").replace("'default'", f"'{second}'").replace("'first'", f"'{first}'")
        return [tuple(row) for row in run_query(mixed_store, sql)[1]]

    found = asked(cookbook("Entries in one mixture that the other never uses"))
    unused = set(positions(mixed_store, first)) - set(positions(mixed_store, second))
    counted = sorted(unused, key=lambda entry: (entry[0], entry[1], -1 if entry[2] is None else entry[2]))
    assert found == asked(BY_VIEWS["Entries in one mixture that the other never uses"]) == counted
    assert found or first == second or second != "few"  # 'few' holds 3 entries: every other mixture has more


def test_entries_a_missing_mixture_never_uses_are_none_and_of_no_mixture_are_all(mixed_store: Path) -> None:
    sql = cookbook("Entries in one mixture that the other never uses")
    assert run_query(mixed_store, sql.replace("'seed7'", "'nothing'"))[1] == []
    everything = sorted(set(positions(mixed_store, "few")),
                        key=lambda entry: (entry[0], entry[1], -1 if entry[2] is None else entry[2]))
    found = run_query(mixed_store, sql.replace("'seed7'", "'few'").replace("'default'", "'nothing'"))[1]
    assert [tuple(row) for row in found] == everything and len(everything) == 3


def test_turns_per_conversation_equal_the_base_entries(mixed_store: Path) -> None:
    """The cookbook reads dataset_turns, which the build wrote."""
    _, found = run_query(mixed_store, cookbook("How many turns conversations have"))
    _, by_views = run_query(mixed_store, BY_VIEWS["How many turns conversations have"])
    _, entries = run_query(mixed_store, "SELECT d.name, b.row FROM base_entries AS b "
                                        "JOIN datasets AS d ON d.id = b.dataset_id")
    counted = sorted(Counter((dataset, n) for (dataset, _), n in Counter(map(tuple, entries)).items()).items())
    assert found == by_views == [(dataset, n, rows) for (dataset, n), rows in counted]
    assert {n for _, n, _ in found} == {1, 2, 3, 4, 5, 6}


def test_why_entries_do_not_train_equals_the_entry_lengths(rendered_store: Path) -> None:
    _, found = run_query(rendered_store, cookbook("Why entries do not train"))
    _, by_views = run_query(rendered_store, BY_VIEWS["Why entries do not train"])
    _, lengths = run_query(rendered_store, "SELECT spec, dataset, status, full_tokens FROM entry_lengths")
    counted: dict[tuple, list[int]] = {}
    for spec, dataset, status, full in lengths:
        counted.setdefault((spec, dataset, status), []).append(full)
    expected = [(*key, len(fulls), max(fulls)) for key, fulls in sorted(counted.items()) if key[2] != "ok"]
    assert found == by_views == expected and found


@pytest.mark.parametrize("mixture", MIXTURES)
def test_tokens_of_a_mixture_under_a_spec_equal_the_positions(rendered_store: Path, mixture: str) -> None:
    """Whole blocks of 256 entries read from render_blocks, the ends of runs and scattered
    positions from entry_renders."""
    def asked(sql: str) -> list[tuple]:
        sql = sql.replace("name = 'default')", f"name = '{mixture}')").replace("e.mixture = 'default'",
                                                                               f"e.mixture = '{mixture}'")
        return [tuple(row) for row in run_query(rendered_store, sql)[1]]

    found = asked(cookbook("Tokens and supervised tokens"))
    assert found == asked(BY_VIEWS["Tokens and supervised tokens"]) and found
    _, blocks = run_query(rendered_store, "SELECT count(*) FROM render_blocks")
    assert blocks[0][0] > 5 and (mixture != "default" or sum(row[1] for row in found) > 3 * 256)


def summaries(store: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(store) as connection:
        found = {table: connection.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3").fetchall()
                 for table in SUMMARIES}
    connection.close()
    return found


def test_rows_read_a_few_entries_at_a_time_give_the_same_summaries(mixed_store: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows spanning chunks, and equal draws stopping once each level has its first rows."""
    monkeypatch.setattr("dataidx.store.sqlite.bulk.ROWS_PER_STATEMENT", 5)
    assert summaries(mixed(tmp_path)) == summaries(mixed_store)


def test_a_store_of_revision_0013_migrates_to_the_summaries_its_writers_write(rendered_store: Path,
                                                                              tmp_path: Path) -> None:
    store = tmp_path / "old.db"
    store.write_bytes(rendered_store.read_bytes())
    written = summaries(store)
    downgrade_store(store, "0013")
    assert store_revision(store) == "0013"
    migrate_store(store)
    assert summaries(store) == written and all(written.values())


def test_a_store_of_revision_0015_migrates_to_rows_by_the_times_they_are_drawn(rendered_store: Path,
                                                                              tmp_path: Path) -> None:
    """Before 0016 a row's times summed its cuts; migrating counts every mixture's rows again, and
    downgrading counts the sums back."""
    store = tmp_path / "old.db"
    store.write_bytes(rendered_store.read_bytes())
    written = summaries(store)
    downgrade_store(store, "0015")
    shown = Counter((dataset, row) for dataset, row, _ in positions(rendered_store, "grown"))
    with sqlite3.connect(store) as connection:  # an old store is refused by the readers: read it plainly
        old = connection.execute("SELECT d.name, r.times, r.rows FROM repeat_counts AS r JOIN datasets AS d "
                                 "ON d.id = r.dataset_id WHERE r.mixture_id = (SELECT id FROM mixtures WHERE "
                                 "name = 'grown') ORDER BY 1, 2").fetchall()
    connection.close()
    assert old == sorted((dataset, n, rows) for (dataset, n), rows in
                         Counter((d, n) for (d, _), n in shown.items()).items())
    assert summaries(store) != written
    migrate_store(store)
    assert summaries(store) == written and all(written.values())


@pytest.mark.parametrize("change", ["DELETE FROM entry_renders WHERE entry_id = (SELECT max(id) FROM base_entries)",
                                    "UPDATE entry_renders SET tokens = -1 WHERE entry_id = (SELECT min(id) FROM "
                                    "base_entries)",
                                    "UPDATE entry_renders SET tokens = '12x' WHERE entry_id = (SELECT min(id) + 1 "
                                    "FROM base_entries)"])
def test_a_spec_whose_rows_are_damaged_migrates_without_length_chunks_and_is_still_refused(
        rendered_store: Path, tmp_path: Path, change: str) -> None:
    """Migrating to 0015 writes no chunks a render would not: pack reads the rows and refuses them."""
    from click.testing import CliRunner

    from dataidx.cli import cli

    store = tmp_path / "old.db"
    store.write_bytes(rendered_store.read_bytes())
    downgrade_store(store, "0014")
    with sqlite3.connect(store) as connection:
        assert connection.execute(change).rowcount == 1
    connection.close()
    migrate_store(store)
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT count(*) FROM length_chunks").fetchone() == (0,)
    connection.close()
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "default", "--capacity", "4096"])
    assert result.exit_code != 0 and "the store is damaged" in result.output


def test_removing_a_mixture_or_a_spec_removes_its_summaries(rendered_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "removed.db"
    store.write_bytes(rendered_store.read_bytes())
    before = summaries(store)
    remove_mixture(store, "grown")
    remove_render_spec(store, "default")
    after = summaries(store)
    with sqlite3.connect(store) as connection:
        kept = {row[0] for row in connection.execute("SELECT id FROM mixtures")}
    connection.close()
    assert after["dataset_turns"] == before["dataset_turns"]
    for table in MIXTURE_SUMMARIES:
        assert after[table] == [row for row in before[table] if row[0] in kept] != before[table]
    assert all(before[table] and not after[table] for table in SPEC_SUMMARIES)


#: A change to one summary table, and the start of the line verify says about it.
DAMAGES = {
    "dataset_turns": ("UPDATE dataset_turns SET rows = rows + 1 WHERE turns = (SELECT max(turns) FROM dataset_turns)",
                      "dataset_turns: "),
    "repeat_counts": ("UPDATE repeat_counts SET times = times + 100 WHERE mixture_id = "
                      "(SELECT id FROM mixtures WHERE name = 'grown')", "mixture 'grown': repeat_counts: "),
    "repeat_rows": ('DELETE FROM repeat_rows WHERE mixture_id = (SELECT id FROM mixtures WHERE name = \'drawn\') '
                    'AND "row" = (SELECT max("row") FROM repeat_rows)', "mixture 'drawn': repeat_rows: "),
    "mixture_spans": ("UPDATE mixture_spans SET entries = entries - 1 WHERE mixture_id = "
                      "(SELECT id FROM mixtures WHERE name = 'epochs') AND entries > 1",
                      "mixture 'epochs': mixture_spans cover "),
    "a span too many": ("INSERT INTO mixture_spans SELECT id, 1, 1 FROM mixtures WHERE name = 'few' AND NOT EXISTS "
                        "(SELECT 1 FROM mixture_spans WHERE first_entry = 1 AND mixture_id = mixtures.id)",
                        "mixture 'few': mixture_spans cover "),
    "render_statuses": ("UPDATE render_statuses SET longest = longest + 1 WHERE status = 'ok'",
                        "render spec 'default': render_statuses: "),
    "render_blocks": ("DELETE FROM render_blocks WHERE block = 1", "render spec 'default': render_blocks: "),
    "length_chunks": ("UPDATE length_chunks SET tokens = zeroblob(length(tokens))",
                      "render spec 'default': length_chunks: "),
    "a length chunk short": ("UPDATE length_chunks SET entries = entries - 1",
                             "render spec 'default': length_chunks: "),
}


def test_verify_recounts_the_summaries_and_names_the_one_that_differs(rendered_store: Path, tmp_path: Path) -> None:
    """The cookbook answers from the summaries: verify recounts each from what it summarises."""
    from dataidx.read import verify_store

    assert verify_store(rendered_store)["ok"]
    for name, (change, said) in DAMAGES.items():
        store = Path(shutil.copyfile(rendered_store, tmp_path / f"{name}.db"))
        with sqlite3.connect(store) as connection:
            assert connection.execute(change).rowcount > 0, name
        connection.close()
        report = verify_store(store)
        assert not report["ok"] and [line[: len(said)] for line in report["integrity"]] == [said], \
            (name, report["integrity"])

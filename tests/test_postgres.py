"""A store in PostgreSQL, against a real server started for these tests (see postgres_server.py).

Everything is compared with the same work on a SQLite file: a store must read the same
wherever it lives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx import DataEngine, PackedDataset
from dataidx.cli import cli
from dataidx.errors import StaleStoreError, StoreError
from dataidx.index import build
from dataidx.read import verify_store
from dataidx.store import store_location
from dataidx.store.location import PostgresStore
from dataidx.store.postgres.read import postgres_conninfo

from .helpers import REPO, engine_length, engine_samples, train_tokenizer, write_jsonl, write_yaml
from .postgres_server import running_server

pytestmark = pytest.mark.slow  # a real PostgreSQL server

DEMO = str(REPO / "data" / "demo_sft.yaml")
_schemas = count()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server() as url:
        yield url


@pytest.fixture
def url(server: str) -> str:
    """A store URL in a schema of its own."""
    return f"{server}&schema=t{next(_schemas)}"


def run(*args: str) -> click.testing.Result:  # noqa: F821
    return CliRunner().invoke(cli, list(args))


def sql(server: str, statement: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(postgres_conninfo(store_location(server + "&schema=x")), autocommit=True) as connection:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _stable(info: dict) -> dict:
    """What must agree between the same build in two places: all but where and when."""
    info = {**info, "store": None, "build": {**info["build"], "created_at": None, "seconds": None}}
    info["mixtures"] = [{**m, "created_at": None} for m in info["mixtures"]]
    info["datasets"] = [{**d, "files": _unplaced(d["files"])} for d in info["datasets"]]
    return info


def _unplaced(files: list[dict]) -> list[dict]:
    """Source file records less their places relative to a store file: a schema has no folder."""
    return [{key: value for key, value in entry.items() if key != "relative"} for entry in files]


def test_tokens_of_a_store_on_the_server_live_where_the_store_records(url: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A team's store: the token file goes to a folder every reader mounts (--tokens-dir), recorded
    # in the store; without one, the rendering machine's cache folder, also recorded.
    monkeypatch.setenv("DATAIDX_CACHE", str(tmp_path / "cache"))
    tokenizer = str(REPO / "data" / "demo_tokenizer")
    file = tmp_path / "demo.db"
    build(DEMO, file)
    assert run("build", DEMO, "-o", url).exit_code == 0
    shared = tmp_path / "shared-tokens"
    for target, extra in ((str(file), []), (url, ["--tokens-dir", str(shared)])):
        result = run("render", target, "--tokenizer", tokenizer, "--cutoff", "256", "--store-tokens", "-q", *extra)
        assert result.exit_code == 0, result.output
    assert len(list(shared.glob("*.tokens"))) == 1
    folder = json.loads(run("query", url, "--json", "SELECT folder, bytes FROM token_files").output)[0]
    assert folder["folder"] == str(shared.resolve()) and folder["bytes"] > 64
    assert engine_samples(url, render="default") == engine_samples(file, render="default")
    with DataEngine(url, render="default") as engine:
        assert engine.reader.tokens is not None
    assert run("verify", url, "--tokens", "--all").exit_code == 0
    result = run("render", url, "--tokenizer", tokenizer, "--cutoff", "128", "--store-tokens", "-q", "--name", "b")
    assert result.exit_code == 0, result.output
    cached = json.loads(run("query", url, "--json", "SELECT folder FROM token_files WHERE spec = 'b'").output)[0]
    assert cached["folder"].startswith(str(tmp_path / "cache" / "postgres-tokens"))
    for path in Path(cached["folder"]).glob("*.tokens"):  # another machine: the folder is not there
        path.unlink()
    with pytest.raises(StaleStoreError, match=f"{cached['folder']}/.*is missing"):
        DataEngine(url, render="b")


def test_build_info_compose_and_query_match_a_file(url: str, tmp_path: Path) -> None:
    file = str(tmp_path / "demo.db")
    for target in (file, url):
        result = run("build", DEMO, "-o", target, "--seed", "7")
        assert result.exit_code == 0, result.output
    assert "demo_sharegpt" in result.output and "publishing into schema" in result.output
    infos = [json.loads(run("info", target, "--json").output) for target in (file, url)]
    assert _stable(infos[0]) == _stable(infos[1])
    for command in (["compose", "--json"], ["query", "--json", "SELECT * FROM entries ORDER BY mixture, position"],
                    ["query", "--json", "SELECT * FROM composition"],
                    ["query", "--json", "SELECT * FROM repeats ORDER BY dataset, row, cut"],
                    ["query", "--json", "SELECT * FROM turns ORDER BY dataset, row"]):
        outputs = [run(command[0], target, *command[1:]) for target in (file, url)]
        assert outputs[0].exit_code == 0 and outputs[1].exit_code == 0, outputs[1].output
        assert json.loads(outputs[0].output) == json.loads(outputs[1].output), command


def test_fetch_matches_a_file_in_the_process_and_in_workers(url: str, tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    file = tmp_path / "demo.db"
    build(DEMO, file)
    build(DEMO, url)
    with DataEngine(file) as local, DataEngine(url) as shared:
        expected = [local[i] for i in range(len(local))]
        assert [shared[i] for i in range(len(shared))] == expected
        backwards = list(range(len(local)))[::-1]
        assert shared.__getitems__(backwards) == local.__getitems__(backwards)
        loader = DataLoader(shared, batch_size=5, num_workers=2, multiprocessing_context="fork", collate_fn=list)
        assert [sample for batch in loader for sample in batch] == expected
        assert shared[0] == expected[0]  # the parent's connection survived its forked workers


def test_mix_remove_render_and_pack_on_the_server(url: str, tmp_path: Path) -> None:
    assert run("build", DEMO, "-o", url).exit_code == 0
    result = run("mix", url, DEMO, "--name", "other", "--seed", "3")
    assert result.exit_code == 0, result.output
    names = json.loads(run("query", url, "--json", "SELECT name FROM mixtures ORDER BY id").output)
    assert [row["name"] for row in names] == ["default", "other"]
    assert engine_length(url, "other") == engine_length(url)
    assert run("remove-mixture", url, "other").exit_code == 0
    assert "other" not in run("info", url).output

    tokenizer = str(REPO / "data" / "demo_tokenizer")
    file = tmp_path / "demo.db"
    build(DEMO, file)
    for target in (str(file), url):
        assert run("render", target, "--tokenizer", tokenizer, "--cutoff", "256", "-q").exit_code == 0
        result = run("pack", target, "--spec", "default", "--capacity", "512")
        assert result.exit_code == 0, result.output
    with PackedDataset(file) as on_file, PackedDataset(url) as on_server:
        assert len(on_file) == len(on_server) > 0
        assert [[s["input_ids"] for s in on_server[i]] for i in range(len(on_server))] == \
            [[s["input_ids"] for s in on_file[i]] for i in range(len(on_file))]
    assert [s["labels"] for s in engine_samples(url, render="default")] == \
        [s["labels"] for s in engine_samples(file, render="default")]
    assert run("remove-plan", url, "default").exit_code == 0
    assert run("remove-spec", url, "default").exit_code == 0
    info = json.loads(run("info", url, "--json").output)
    assert info["render_specs"] == [] and info["pack_plans"] == []
    result = run("migrate", url)
    assert result.exit_code == 0 and "already at schema revision" in result.output


def test_token_budgets_and_epochs_on_the_server_match_a_file(url: str, tmp_path: Path) -> None:
    file = str(tmp_path / "demo.db")
    budgets = str(REPO / "data" / "demo_budgets.yaml")
    tokenizer = str(REPO / "data" / "demo_tokenizer")
    for target in (file, url):
        assert run("build", DEMO, "-o", target, "-q").exit_code == 0
        assert run("render", target, "--tokenizer", tokenizer, "--cutoff", "256", "-q").exit_code == 0
        result = run("mix", target, budgets, "--name", "by_tokens", "--spec", "default", "--epochs", "3")
        assert result.exit_code == 0, result.output
        assert run("pack", target, "--spec", "default", "--mixture", "by_tokens", "--capacity", "256").exit_code == 0
        assert run("pack", target, "--spec", "default", "--mixture", "by_tokens", "--capacity", "256", "--name",
                   "ranks", "--world-size", "2", "--balance", "compute", "--cost", "1,0.01").exit_code == 0
    for command in (["compose", "--json", "--mixture", "by_tokens", "--spec", "default"],
                    ["compose", "--json", "--mixture", "by_tokens", "--spec", "default", "--epoch", "2"],
                    ["query", "--json", "SELECT * FROM token_composition"],
                    ["query", "--json", "SELECT * FROM entries WHERE mixture = 'by_tokens' ORDER BY epoch, position"],
                    ["query", "--json", "SELECT * FROM pack_members ORDER BY plan, epoch, pack, slot"],
                    ["query", "--json", "SELECT plan, epoch, step, rank, packs, tokens, imbalance < 1.05 AS balanced "
                                        "FROM plan_balance ORDER BY plan, epoch, step, rank"]):
        outputs = [run(command[0], target, *command[1:]) for target in (file, url)]
        assert outputs[0].exit_code == 0 and outputs[1].exit_code == 0, outputs[1].output
        assert json.loads(outputs[0].output) == json.loads(outputs[1].output), command
    with DataEngine(file, "by_tokens", epoch=1) as local, DataEngine(url, "by_tokens", epoch=1) as shared:
        assert [shared[i] for i in range(len(shared))] == [local[i] for i in range(len(local))]
        shared.set_epoch(2)
        assert shared[0] == engine_samples(file, "by_tokens", epoch=2)[0]
        assert verify_store(url)["ok"]


@pytest.mark.parametrize("statement", [
    "DELETE FROM mixtures",
    "CREATE TABLE evil (x int)",
    "SELECT 1; COMMIT; SET default_transaction_read_only = off; DELETE FROM mixtures",
    "WITH gone AS (DELETE FROM mixtures RETURNING id) SELECT count(*) FROM gone",
])
def test_query_is_read_only(url: str, statement: str) -> None:
    build(DEMO, url)
    result = run("query", url, statement)
    assert result.exit_code == 1 and "refused" in result.output, result.output
    assert json.loads(run("query", url, "--json", "SELECT count(*) AS n FROM mixtures").output) == [{"n": 1}]


def test_query_parameters_and_percent_signs(url: str, tmp_path: Path) -> None:
    for store in (str(tmp_path / "demo.db"), url):
        build(DEMO, store)
        result = run("query", store, "--json", "--param", "name=demo_alpaca", "--param", "least=0",
                     "SELECT count(*) AS n FROM entries "
                     "WHERE dataset = :name AND row >= :least AND dataset LIKE 'demo%'")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output) == [{"n": 12}]
        missing = run("query", store, "SELECT * FROM entries WHERE dataset = :name")
        assert missing.exit_code == 1 and "name" in missing.output
    assert run("query", url, "SELECT 1", "--param", "no-equals").exit_code == 2


def test_export_and_verify_read_the_server(url: str, tmp_path: Path) -> None:
    file = tmp_path / "demo.db"
    build(DEMO, file)
    build(DEMO, url)
    for store, out in ((str(file), tmp_path / "file.jsonl"), (url, tmp_path / "server.jsonl")):
        assert run("export", store, "-o", str(out)).exit_code == 0
    assert (tmp_path / "file.jsonl").read_text() == (tmp_path / "server.jsonl").read_text() != ""
    report = json.loads(run("verify", url, "--json").output)
    assert report["ok"] and report["integrity"] == []


def test_a_reader_role_keeps_its_access_and_cannot_write(server: str, url: str) -> None:
    schema = store_location(url).schema
    build(DEMO, url)
    sql(server, "DO $$ BEGIN CREATE ROLE reader LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    sql(server, f"GRANT USAGE ON SCHEMA {schema} TO reader")
    sql(server, f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO reader")
    build(DEMO, url, seed=5)  # a new schema replaces the old one: the grants come along
    as_reader = url.replace("postgresql://postgres@", "postgresql://reader@")
    assert json.loads(run("compose", as_reader, "--json").output)[0]["dataset"] == "demo_alpaca"
    assert engine_length(as_reader) == 37
    result = run("mix", as_reader, DEMO, "--name", "mine")
    assert result.exit_code == 1 and "cannot write" in result.output, result.output


def test_a_reader_notices_when_the_store_is_replaced(url: str) -> None:
    build(DEMO, url)
    with DataEngine(url) as engine:
        first = engine[0]
        build(DEMO, url, seed=5)
        with pytest.raises(StaleStoreError, match="the store was rebuilt"):
            engine[0]
        assert engine_samples(url)[0] is not None and first is not None


def test_a_failed_build_leaves_the_old_store(url: str, tmp_path: Path) -> None:
    build(DEMO, url)
    before = run("info", url, "--json").output
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"conversations": [{"value": "no role"}]}])
    config = write_yaml(tmp_path / "bad.yaml", f"bad:\n  path: {bad}\n  source: local\n  converter: sharegpt\n")
    result = run("build", str(config), "-o", url)
    assert result.exit_code == 1 and "row 0, converter 'sharegpt': missing key 'from'" in result.output, result.output
    assert run("info", url, "--json").output == before


def test_a_store_with_two_revisions_or_a_table_replaced_by_a_view_is_refused_on_open(server: str, url: str) -> None:
    assert run("build", DEMO, "-o", url).exit_code == 0
    schema = store_location(url).schema
    sql(server, f"INSERT INTO {schema}.alembic_version VALUES ('0014')")
    for args in (("info", url), ("migrate", url)):
        result = run(*args)
        assert result.exit_code == 1 and "records more than one schema revision" in result.stderr, result.output
    sql(server, f"DELETE FROM {schema}.alembic_version WHERE version_num = '0014'")
    sql(server, f"DROP TABLE {schema}.mixture_runs CASCADE")  # and the views that read it
    sql(server, f"CREATE VIEW {schema}.mixture_runs AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                "FROM r) SELECT x AS id, 1 AS mixture_id, 0 AS start, 1 AS first_entry, 1 AS length FROM r WHERE x < 0")
    result = run("show", url, "0")  # read until Ctrl-C before
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "view 'mixture_runs' in place of the table; view 'entries' is missing;" in result.stderr
    with pytest.raises(StoreError, match="view 'mixture_runs' in place of the table"):
        DataEngine(url)


def test_clear_errors_for_missing_stores_and_servers(server: str, url: str) -> None:
    result = run("info", url)
    assert result.exit_code == 1 and "no dataidx store in schema" in result.output
    unreachable = "postgresql://someone:s3cret@/postgres?host=/nonexistent&port=1"
    result = run("info", unreachable)
    assert result.exit_code == 1 and "cannot connect" in result.output and "s3cret" not in result.output
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        store_location("mysql://user@host/db")
    with pytest.raises(StoreError, match="schema"):
        store_location("postgresql://user@host/db?schema=Bad-Name")


def test_store_arguments_parse_paths_and_urls(tmp_path: Path) -> None:
    assert store_location("stores/demo.db") == Path("stores/demo.db")
    assert store_location(f"sqlite:///{tmp_path}/demo.db") == tmp_path / "demo.db"
    found = store_location("postgresql://bob:pw@db.example/team?schema=sft")
    assert isinstance(found, PostgresStore) and found.schema == "sft"
    from psycopg.conninfo import conninfo_to_dict

    assert "pw" not in str(found) and "pw" not in repr(found)
    assert conninfo_to_dict(postgres_conninfo(found)) == {"user": "bob", "password": "pw", "host": "db.example",
                                                          "dbname": "team"}
    assert str(StoreError("postgresql+psycopg://bob:pw@db/x: gone")) == "postgresql+psycopg://bob:***@db/x: gone"
    sqlite_url = f"sqlite:///{tmp_path}/demo.db"
    assert run("build", DEMO, "-o", sqlite_url, "-q").exit_code == 0
    assert engine_length(sqlite_url) == 37


def test_shell_pipeline_on_the_server(url: str) -> None:
    """The CLI as a team would use it: build on one machine, read from another process."""
    assert subprocess.run([sys.executable, "-m", "dataidx", "build", DEMO, "-o", url, "-q"]).returncode == 0
    out = subprocess.run([sys.executable, "-m", "dataidx", "show", url, "0"], capture_output=True, text=True)
    assert out.returncode == 0 and json.loads(out.stdout)["_dataset_name"] == "demo_alpaca"


def test_the_sql_cookbook_answers_the_same_on_the_server(url: str, tmp_path: Path) -> None:
    """docs/sql.md's examples are portable SQL: same columns, same rows (as multisets)."""
    from dataidx.index import add_mixture
    from dataidx.pack import pack_store
    from dataidx.render import RenderRequest, render_store
    from dataidx.store import run_query

    from .test_docs import sql_examples

    tokenizer = train_tokenizer(tmp_path / "tokenizer") and tmp_path / "tokenizer"
    stores = [str(tmp_path / "demo.db"), url]
    for store in stores:
        build(DEMO, store)
        add_mixture(store, DEMO, "seed7", seed=7, sampling="replacement")
        render_store(RenderRequest(store, tokenizer, template="chatml", cutoff=96, truncation="drop"))
        pack_store(store, "default", capacity=256)
    for sql_text in sql_examples():
        (columns, rows), (server_columns, server_rows) = (run_query(store, sql_text) for store in stores)
        assert server_columns == columns, sql_text
        key = repr if "ORDER BY" not in sql_text else None
        assert (sorted(server_rows, key=key) if key else server_rows) == (sorted(rows, key=key) if key else rows), \
            sql_text


def test_nothing_dataidx_did_not_make_is_ever_dropped(server: str, url: str) -> None:
    schema = store_location(url).schema
    for create, check, expected in (
        (f"CREATE TABLE {schema}.customers (id int)", f"SELECT count(*) FROM {schema}.customers", [(0,)]),
        (f"CREATE FUNCTION {schema}.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", f"SELECT {schema}.answer()",
         [(42,)]),
    ):
        sql(server, f"CREATE SCHEMA {schema}")
        sql(server, create)
        result = run("build", DEMO, "-o", url)
        assert result.exit_code == 1 and "not a dataidx store" in result.output, result.output
        assert sql(server, check) == expected
        sql(server, f"DROP SCHEMA {schema} CASCADE")

    build(DEMO, url)
    sql(server, f"CREATE SCHEMA {schema}_report")
    sql(server, f"CREATE VIEW {schema}_report.sizes AS SELECT name, entries FROM {schema}.mixtures")
    result = run("mix", url, DEMO, "--name", "other")
    assert result.exit_code == 1 and "depend" in result.output, result.output
    assert sql(server, f"SELECT count(*) FROM {schema}_report.sizes") == [(1,)]
    sql(server, f"DROP SCHEMA {schema}_report CASCADE")
    sql(server, f"CREATE TABLE {schema}.notes (text text)")
    result = run("mix", url, DEMO, "--name", "other")
    assert result.exit_code == 1 and "did not make" in result.output, result.output
    assert sql(server, f"SELECT count(*) FROM {schema}.notes") == [(0,)]
    assert [row["name"] for row in json.loads(run("query", url, "--json", "SELECT name FROM mixtures").output)] \
        == ["default"]
    with pytest.raises(StoreError, match="belongs to the database"):
        store_location(server + "&schema=public")


def test_a_schema_named_like_a_keyword(server: str) -> None:
    keyword = f"{server}&schema=select"
    build(DEMO, keyword)
    build(DEMO, keyword, seed=3)
    assert engine_length(keyword) == 37 and run("compose", keyword).exit_code == 0


def test_an_empty_answer_is_checked_against_the_stamp_too(url: str) -> None:
    build(DEMO, url)
    assert run("render", url, "--tokenizer", str(REPO / "data" / "demo_tokenizer"),
               "--cutoff", "256", "-q").exit_code == 0
    assert run("pack", url, "--spec", "default", "--capacity", "512").exit_code == 0
    with PackedDataset(url) as packs:
        assert packs[0]
        assert run("remove-plan", url, "default").exit_code == 0
        with pytest.raises(StaleStoreError):
            packs[0]


def test_a_reader_outlives_a_dropped_connection(server: str, url: str) -> None:
    build(DEMO, url)
    with DataEngine(url) as engine:
        first = engine[0]
        sql(server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND usename = 'postgres' AND backend_type = 'client backend'")
        assert engine[0] == first


def test_a_busy_store_makes_a_write_wait_then_give_up_cleanly(server: str, url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from dataidx.index import add_mixture

    build(DEMO, url)
    monkeypatch.setattr("dataidx.store.postgres.swap.LOCK_WAIT", "100ms")
    monkeypatch.setattr("dataidx.store.postgres.swap.SWAP_ATTEMPTS", 3)
    schema = store_location(url).schema
    with psycopg.connect(postgres_conninfo(store_location(url))) as reader:  # a long read holds its tables
        reader.execute(f"SELECT count(*) FROM {schema}.mixtures").fetchall()
        with pytest.raises(StoreError, match="readers kept the store busy"):
            add_mixture(url, DEMO, "other", seed=1)
    add_mixture(url, DEMO, "other", seed=1)
    assert engine_length(url, "other") == 37


def test_server_specific_answers_and_refusals(server: str, url: str, tmp_path: Path) -> None:
    file = str(tmp_path / "demo.db")
    build(DEMO, file)
    build(DEMO, url)
    files = [json.loads(run("query", store, "--json", "SELECT files FROM datasets ORDER BY id").output)
             for store in (file, url)]
    assert isinstance(files[1][0]["files"], str)
    assert [_unplaced(json.loads(row["files"])) for row in files[0]] == [json.loads(row["files"]) for row in files[1]]
    result = run("query", url, "--json", "SELECT ':x' AS literal, 'NaN'::numeric AS nan, now() AS at")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["literal"] == ":x"
    target = tmp_path / "copied.txt"
    result = run("query", url, f"COPY (SELECT 1) TO '{target}'")
    assert result.exit_code == 1 and "only SELECT" in result.output and not target.exists()
    timed = url + "&options=-c%20statement_timeout%3D1234"
    # The URL's own settings reach the server (--timeout 0 leaves statement_timeout to them).
    assert json.loads(run("query", timed, "--json", "--timeout", "0",
                          "SELECT current_setting('statement_timeout') AS t").output) == [{"t": "1234ms"}]
    result = run("build", DEMO, "-o", url + "&bogus=1")
    assert result.exit_code == 1 and "cannot connect" in result.output, result.output
    secret = url.replace("postgresql://postgres@", "postgresql://postgres:pw1@") + "&password=pw2"
    result = run("info", secret.replace("schema=", "schema=nothing_"))
    assert result.exit_code == 1 and "pw1" not in result.output and "pw2" not in result.output


def test_public_grants_and_missing_rights(server: str, url: str) -> None:
    schema = store_location(url).schema
    build(DEMO, url)
    sql(server, "DO $$ BEGIN CREATE ROLE nobody LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    as_nobody = url.replace("postgresql://postgres@", "postgresql://nobody@")
    result = run("info", as_nobody)
    assert result.exit_code == 1 and "may not read schema" in result.output, result.output
    sql(server, f"GRANT USAGE ON SCHEMA {schema} TO PUBLIC")
    sql(server, f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO PUBLIC")
    assert run("mix", url, DEMO, "--name", "other").exit_code == 0
    assert run("info", as_nobody).exit_code == 0


def test_query_on_the_server_stops_at_its_timeout_and_limits_rows(url: str) -> None:
    build(DEMO, url)
    result = run("query", url, "SELECT pg_sleep(30)", "--timeout", "0.5")
    assert result.exit_code == 1 and "query stopped after 0.5 s" in result.output
    limited = run("query", url, "SELECT position FROM entries ORDER BY position", "--limit", "3", "--csv")
    assert limited.exit_code == 0 and limited.stdout.split() == ["position", "0", "1", "2"]
    assert "stopped at --limit 3 rows" in limited.stderr
    # JIT stays off for a query: a store's estimates run high, and compiling cost seconds.
    assert run("query", url, "SELECT current_setting('jit') AS jit", "--csv").stdout.split() == ["jit", "off"]


def test_a_query_answer_on_the_server_stops_at_the_memory_a_files_does(url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    build(DEMO, url)
    monkeypatch.setattr("dataidx.store.sqlite.bounds.ANSWER_BYTES", 1 << 20)
    rows = "SELECT repeat('x', 50000) AS x FROM generate_series(1, 40)"
    result = run("query", url, rows)  # held whole before
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "query refused: its answer passed 1 MiB after 20 rows" in result.stderr
    assert run("query", url, rows, "--limit", "5").exit_code == 0


def test_a_reader_holding_the_writers_lock_is_named_and_writers_do_not_wait_forever(
        server: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    schema = store_location(url).schema
    build(DEMO, url)
    sql(server, "DO $$ BEGIN CREATE ROLE reader LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    as_reader = store_location(url.replace("postgresql://postgres@", "postgresql://reader@"))
    monkeypatch.setattr("dataidx.store.postgres.publish.WRITER_WAIT", 1.0)
    with psycopg.connect(postgres_conninfo(as_reader), autocommit=True, application_name="squatter") as squatter:
        squatter.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"dataidx:{schema}",))  # any role can
        result = run("mix", url, DEMO, "--name", "other")
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert "held by user 'reader' (application 'squatter'" in result.stderr and "waited 1 s" in result.stderr
    assert run("mix", url, DEMO, "--name", "other").exit_code == 0  # released: writes go on


def test_writes_never_stop_readers_of_what_they_did_not_change_on_the_server(url: str) -> None:
    from .test_hostile import epochs_while_mixing

    build(DEMO, url)
    epochs_while_mixing(url, Path(DEMO))


def test_orders_skip_lists_and_steps_on_the_server_match_a_file(url: str, tmp_path: Path) -> None:
    from dataidx import OrderSampler

    file = tmp_path / "demo.db"
    build(DEMO, file)
    build(DEMO, url)
    for store in (str(file), url):
        result = run("skip", store, "spike", "--steps", "1", "--global-batch-size", "6", "--seed", "2", "--why", "x")
        assert result.exit_code == 0, result.output
        result = run("skip", store, "rows", "--entry", "demo_alpaca:4", "--why", "bad", "--who", "bo")
        assert result.exit_code == 0, result.output
    read, steps, skips = [], [], []
    for store in (str(file), url):
        with DataEngine(store) as engine:
            read.append([i for batch in OrderSampler(engine, global_batch_size=6, seed=2) for i in batch])
        steps.append(run("steps", store, "--global-batch-size", "6", "--seed", "2", "1-3", "--json").stdout)
        skips.append(run("query", store, "SELECT dataset, row, cut, who, why FROM skips ORDER BY 1, 2, 3",
                         "--json").stdout)
    assert read[0] == read[1] and len(read[0]) > 0 and steps[0] == steps[1] != "" and skips[0] == skips[1]
    assert "bo" in skips[1] and run("unskip", url, "rows").exit_code == 0
    assert "skip list 'rows'" not in run("info", url).stdout and "skip list 'spike'" in run("info", url).stdout


def test_merged_cut_plans_on_the_server_match_a_file(url: str, tmp_path: Path) -> None:
    tokenizer = str(REPO / "data" / "demo_tokenizer")
    config = write_yaml(tmp_path / "chats.yaml", f"chats:\n  path: {REPO / 'data' / 'demo_sharegpt.json'}\n"
                                                  "  source: local\n  converter: sharegpt\n")
    file = tmp_path / "demo.db"
    build(config, file)
    build(config, url)
    said, merges, packs = [], [], []
    for store in (str(file), url):
        result = run("render", store, "--tokenizer", tokenizer, "--cutoff", "512", "--store-tokens", "-q",
                     "--tokens-dir", str(tmp_path / "tokens"))
        assert result.exit_code == 0, result.output
        result = run("pack", store, "--spec", "default", "--capacity", "1024", "--merge-cuts", "--trees")
        assert result.exit_code == 0, result.output
        said.append(result.stderr.splitlines()[1])
        merges.append(run("query", store, "SELECT * FROM cut_merges ORDER BY outcome", "--json").stdout)
        with PackedDataset(store) as packed:
            packs.append([packed[i] for i in range(len(packed))])
        assert "merges cuts (trees)" in run("info", store).stdout
    assert said[0] == said[1] and "merged cuts: " in said[0] and merges[0] == merges[1] and "merged" in merges[0]
    assert packs[0] == packs[1]


def test_a_held_out_eval_set_on_the_server_matches_a_file(url: str, tmp_path: Path) -> None:
    """``build --val-size``: the same rows held out, the same eval mixture and what info, compose and
    verify say of it (the hold-out's SQL, over the server's views, as over a file's)."""
    file = str(tmp_path / "demo.db")
    for target in (file, url):
        result = run("build", DEMO, "-o", target, "--val-size", "0.2", "-q")
        assert result.exit_code == 0, result.output
    held = "SELECT dataset, \"row\", cut FROM entries WHERE mixture = 'eval' ORDER BY 1, 2, 3"
    outputs = [json.loads(run("query", target, "--json", held).output) for target in (file, url)]
    assert outputs[0] == outputs[1] != []
    infos = [json.loads(run("info", target, "--json").output) for target in (file, url)]
    assert _stable(infos[0]) == _stable(infos[1])
    for mixture in ("eval", "default"):
        composed = [run("compose", target, "--mixture", mixture) for target in (file, url)]
        assert composed[0].output == composed[1].output and "held out for evaluation" in composed[1].output
    assert engine_length(url, mixture="eval") == len(outputs[1])
    report = json.loads(run("verify", url, "--json").output)
    assert report["ok"] and report["integrity"] == []

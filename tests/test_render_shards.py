"""Rendering in shards (issue 54): any number of shards, merged, is a serial render (rows,
summaries, token file), through ``render_shard`` and ``merge_parts``, the local runner and the
command line (a Slurm array's environment included); a worker killed mid-part costs only its own
shard again; and every part that is not exactly the store's is refused in one line, the store
left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.errors import RenderError
from dataidx.index import build
from dataidx.render import merge_parts, render_shard, render_store
from dataidx.render.request import RenderRequest

from .helpers import REPO, alpaca_rows, chat_rows, one_line_error, write_jsonl, write_yaml

#: What a render writes of a spec, compared table by table.
TABLES = ("entry_renders", "render_statuses", "render_blocks", "length_chunks", "render_causes", "added_token_uses")


def spec_state(store: Path, spec: str = "default") -> dict[str, Any]:
    """Every row a render wrote for ``spec`` (ids of the spec left out), and its token file's record."""
    with sqlite3.connect(store) as connection:
        spec_id, = connection.execute("SELECT id FROM render_specs WHERE name = ?", (spec,)).fetchone()
        state: dict[str, Any] = {
            table: connection.execute(f"SELECT * FROM {table} WHERE spec_id = ? ORDER BY 2, 3, 4",
                                      (spec_id,)).fetchall() for table in TABLES}
        state["spec"] = connection.execute("SELECT name, fingerprint, tokenizer_sha256, template_text, cutoff, "
                                           "truncation, entries, kept, clock, escapes FROM render_specs WHERE id = ?",
                                           (spec_id,)).fetchone()
        state["tokens"] = connection.execute("SELECT word_bytes, entries, tokens, bytes, sha256 FROM spec_tokens "
                                             "WHERE spec_id = ?", (spec_id,)).fetchone()
    connection.close()
    return state


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A store of 2,600 rows, 3,650 entries (over one render chunk: alpaca and multi-turn chats), its serial
    render with stored tokens; ``(folder, the serial spec's state)``. Shards render copies."""
    folder = tmp_path_factory.mktemp("shards")
    write_jsonl(folder / "a.jsonl", alpaca_rows(2000))
    write_jsonl(folder / "c.jsonl", chat_rows([1, 2, 3, 5] * 150))
    write_yaml(folder / "c.yaml", f"a:\n  path: {folder / 'a.jsonl'}\n  source: local\n  converter: alpaca\n"
                                  f"c:\n  path: {folder / 'c.jsonl'}\n  source: local\n  converter: sharegpt\n")
    build(folder / "c.yaml", folder / "base.db")
    shutil.copy(folder / "base.db", folder / "serial.db")
    render_store(request(folder / "serial.db", folder / "serial.tokens"))
    return folder, spec_state(folder / "serial.db")


def request(store: Path, tokens: Path, **changed: Any) -> RenderRequest:
    options: dict[str, Any] = {"cutoff": 96, "truncation": "right", "store_tokens": True, "tokens_dir": tokens,
                               "jobs": 1, **changed}
    return RenderRequest(store, REPO / "data" / "demo_tokenizer", **options)


def fresh(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    shutil.copy(project[0] / "base.db", tmp_path / "s.db")
    return tmp_path / "s.db"


@pytest.mark.parametrize("shards", [1, 2, 3, 7])
def test_merged_shards_are_a_serial_render(project: tuple[Path, dict[str, Any]], tmp_path: Path,
                                           shards: int) -> None:
    store = fresh(project, tmp_path)
    outcomes = [render_shard(request(store, tmp_path / "tokens"), shard, shards, tmp_path / "parts")
                for shard in reversed(range(shards))]  # any order: a part is its range's alone
    assert sum(outcome.entries for outcome in outcomes) == project[1]["spec"][6] > 2000
    before = digest(store)
    merge_parts(store, tmp_path / "parts")
    assert digest(store) != before
    assert spec_state(store) == project[1]
    token_files = list((tmp_path / "tokens").glob("*.tokens"))
    serial_files = list((project[0] / "serial.tokens").glob("*.tokens"))
    assert len(token_files) == len(serial_files) == 1
    assert token_files[0].name == serial_files[0].name and digest(token_files[0]) == digest(serial_files[0])


def test_shards_add_tokens_to_a_spec_stored_without(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    store = fresh(project, tmp_path)
    render_store(request(store, tmp_path / "tokens", store_tokens=False, tokens_dir=None))
    lengths = spec_state(store)["entry_renders"]
    for shard in range(3):
        render_shard(request(store, tmp_path / "tokens"), shard, 3, tmp_path / "parts")
    summary = merge_parts(store, tmp_path / "parts")
    assert summary.tokens_added and spec_state(store) == project[1]
    assert [row[:6] for row in spec_state(store)["entry_renders"]] == [row[:6] for row in lengths]


@pytest.mark.slow  # 3 shards in 2 processes of this machine, then a serial render to compare
def test_the_local_runner_and_the_command_line(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    store = fresh(project, tmp_path)
    result = CliRunner().invoke(cli, ["render", str(store), "--tokenizer", str(REPO / "data" / "demo_tokenizer"),
                                      "--cutoff", "96", "--truncation", "right", "--store-tokens", "--tokens-dir",
                                      str(tmp_path / "tokens"), "--shards", "3", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "rendered entries (3 shards) 3,650/3,650 (100%)" in result.stderr, result.stderr
    assert spec_state(store) == project[1]
    assert not (tmp_path / "s.db.parts").exists()  # parts of their own folder are removed once merged


def slurm_task(store: Path, shard: int, shards: int, parts: Path, tokens: Path) -> subprocess.CompletedProcess[str]:
    """One task of a Slurm array, as its sbatch script runs it: the shell expands the array index."""
    dataidx = Path(sys.executable).with_name("dataidx")
    command = (f"{dataidx} render {store} --tokenizer {REPO / 'data' / 'demo_tokenizer'} --cutoff 96 "
               f"--truncation right --store-tokens --tokens-dir {tokens} --jobs 1 "
               f"--shard $SLURM_ARRAY_TASK_ID/{shards} --parts {parts}")
    return subprocess.run(command, shell=True, env={**os.environ, "SLURM_ARRAY_TASK_ID": str(shard)},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # fresh processes, as a Slurm array's tasks are
def test_a_slurm_array_then_merge(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    store = fresh(project, tmp_path)
    for shard in range(3):
        done = slurm_task(store, shard, 3, tmp_path / "parts", tmp_path / "tokens")
        assert done.returncode == 0, done.stderr
        assert f"shard {shard}/3 (base entries" in done.stderr
    again = slurm_task(store, 1, 3, tmp_path / "parts", tmp_path / "tokens")  # a task run twice: skipped
    assert "was done already (its manifest checks): skipped" in again.stderr
    result = CliRunner().invoke(cli, ["merge", str(store), str(tmp_path / "parts")])
    assert result.exit_code == 0, result.output
    assert spec_state(store) == project[1]


@pytest.mark.slow  # a process killed with SIGKILL mid-part, then the shards again
def test_a_shard_killed_mid_part_is_rendered_again_alone(project: tuple[Path, dict[str, Any]],
                                                         tmp_path: Path) -> None:
    store, parts = fresh(project, tmp_path), tmp_path / "parts"
    assert slurm_task(store, 1, 2, parts, tmp_path / "tokens").returncode == 0
    finished = (parts / "shard-00001-of-00002.json").stat().st_mtime_ns
    for _ in range(5):  # killed once its part is begun; a worker that finished first is tried again
        killed_mid_part(store, parts, tmp_path / "tokens")
        if not (parts / "shard-00000-of-00002.json").exists():
            break
        for path in parts.glob("shard-00000-of-00002*"):
            path.unlink()
    assert not (parts / "shard-00000-of-00002.json").exists()
    result = CliRunner().invoke(cli, ["merge", str(store), str(parts)])
    one_line_error(result, "shard 0 of 2 is missing", "--shard 0/2")
    for shard in range(2):  # every task again: only the killed one renders
        done = slurm_task(store, shard, 2, parts, tmp_path / "tokens")
        assert ("skipped" in done.stderr) == (shard == 1), done.stderr
    assert (parts / "shard-00001-of-00002.json").stat().st_mtime_ns == finished
    assert CliRunner().invoke(cli, ["merge", str(store), str(parts)]).exit_code == 0
    assert spec_state(store) == project[1]


def killed_mid_part(store: Path, parts: Path, tokens: Path) -> None:
    """Shard 0 of 2 started in a process of its own, and killed with SIGKILL as soon as its part's
    files are begun (before its manifest)."""
    dataidx = Path(sys.executable).with_name("dataidx")
    worker = subprocess.Popen([str(dataidx), "render", str(store), "--tokenizer", str(REPO / "data" / "demo_tokenizer"),
                               "--cutoff", "96", "--truncation", "right", "--store-tokens", "--tokens-dir",
                               str(tokens), "--jobs", "1", "--shard", "0/2", "--parts", str(parts)],
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(parts.glob(".shard-00000-of-00002.rows.*.tmp")) and worker.poll() is None:
        assert time.monotonic() < deadline, "the shard never began its part"
        time.sleep(0.002)
    worker.send_signal(signal.SIGKILL)
    worker.wait()


def two_parts(project: tuple[Path, dict[str, Any]], tmp_path: Path, **changed: Any) -> tuple[Path, Path]:
    store = fresh(project, tmp_path)
    for shard in range(2):
        render_shard(request(store, tmp_path / "tokens", **changed), shard, 2, tmp_path / "parts")
    return store, tmp_path / "parts"


def seal(manifest: Path, kind: str, path: Path) -> None:
    """Make ``manifest`` say its ``kind`` file is ``path`` as it is now (a crafted part)."""
    record = json.loads(manifest.read_text())
    record["files"][kind].update(bytes=path.stat().st_size, sha256=digest(path))
    manifest.write_text(json.dumps(record))


def refused(store: Path, parts: Path, *fragments: str) -> None:
    """``dataidx merge`` refuses in one line naming what is wrong, and the store is as it was."""
    before = digest(store)
    result = CliRunner().invoke(cli, ["merge", str(store), str(parts)])
    one_line_error(result, *fragments)
    assert digest(store) == before
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT count(*) FROM render_specs").fetchone() == (0,)
    connection.close()


def test_merge_refuses_parts_that_are_not_exactly_the_stores(project: tuple[Path, dict[str, Any]],
                                                             tmp_path: Path) -> None:
    store, parts = two_parts(project, tmp_path)
    rows = parts / "shard-00000-of-00002.rows.db"
    manifest = parts / "shard-00001-of-00002.json"
    original = rows.read_bytes()

    rows.write_bytes(original[: len(original) // 2])  # a truncated part
    refused(store, parts, "shard-00000-of-00002.rows.db", "truncated or rewritten")
    rows.write_bytes(original[:-40] + bytes(b ^ 1 for b in original[-40:]))  # bytes changed, the same size
    refused(store, parts, "its sha256 is not the one its manifest says")
    rows.write_bytes(original)

    shutil.copy(manifest, parts / "shard-00001-of-00002-copy.json")  # two parts cover one range
    refused(store, parts, "two parts cover shard 1 of 2")
    (parts / "shard-00001-of-00002-copy.json").unlink()

    manifest.rename(tmp_path / "aside.json")  # a missing shard
    refused(store, parts, "shard 1 of 2 is missing", "--shard 1/2")
    (tmp_path / "aside.json").rename(manifest)

    render_shard(request(store, tmp_path / "tokens"), 0, 3, parts)  # parts of two layouts
    refused(store, parts, "shard-00000-of-00003.json: a part of 3 shards beside parts of 2")
    for path in parts.glob("shard-00000-of-00003*"):
        path.unlink()

    record = json.loads(manifest.read_text())  # a manifest claiming another range
    manifest.write_text(json.dumps({**record, "first": record["first"] + 1}))
    refused(store, parts, "covers base entries", "of this store")
    manifest.write_text(json.dumps(record))
    assert CliRunner().invoke(cli, ["merge", str(store), str(parts)]).exit_code == 0


def test_merge_refuses_another_specs_build_or_crafted_rows(project: tuple[Path, dict[str, Any]],
                                                           tmp_path: Path) -> None:
    store, parts = two_parts(project, tmp_path)
    other = tmp_path / "other"
    render_shard(request(store, tmp_path / "tokens", cutoff=64), 1, 2, other)  # another spec's part
    shutil.copy(parts / "shard-00000-of-00002.json", other)
    shutil.copy(parts / "shard-00000-of-00002.rows.db", other)
    shutil.copy(parts / "shard-00000-of-00002.tokens", other)
    refused(store, other, "a part of another spec")

    manifest = parts / "shard-00001-of-00002.json"  # a part's file rewritten, the manifest's digest made to match
    rows = parts / "shard-00001-of-00002.rows.db"
    original = rows.read_bytes()
    for crafted, said in (
            ("UPDATE rows SET entry_id = entry_id + 100000 WHERE entry_id = (SELECT min(entry_id) FROM rows)",
             "holds a row of base entry 101826, outside its range 1826..3650"),
            ("DELETE FROM rows WHERE entry_id = 2000", "holds fewer rows than its base entries 1826..3650"),
            ("UPDATE rows SET status = 'fine' WHERE entry_id = (SELECT max(entry_id) FROM rows)",
             "base entry 3650's row holds a value no render writes"),
            ("UPDATE rows SET tokens = -1 WHERE entry_id = (SELECT max(entry_id) FROM rows)",
             "base entry 3650's row holds a value no render writes"),
            ("UPDATE rows SET token_offset = 1 << 40 WHERE entry_id = (SELECT max(entry_id) FROM rows)",
             "base entry 3650's row holds a value no render writes"),
            ("CREATE VIEW counted AS SELECT count(*) FROM rows", "not a part's rows file"),
            ("UPDATE render_statuses SET entries = 'many'", "its summaries hold a value that is not a count"),
            ("UPDATE lengths SET tokens = x'00'", "its lengths are not 4 bytes for each of its 1,825 entries")):
        with sqlite3.connect(rows) as connection:
            connection.execute(crafted)
        connection.close()
        seal(manifest, "rows", rows)
        refused(store, parts, "shard-00001-of-00002.rows.db", said)
        rows.write_bytes(original)
    seal(manifest, "rows", rows)
    tokens = parts / "shard-00001-of-00002.tokens"
    tokens.write_bytes(tokens.read_bytes()[:-8] + (1 << 62).to_bytes(8, "little"))  # an index past its words
    seal(manifest, "tokens", tokens)
    refused(store, parts, "shard-00001-of-00002.tokens: its index does not step through its")
    manifest.write_text("{" * 100_000)  # not JSON a manifest is
    refused(store, parts, "shard-00001-of-00002.json: not a part's manifest")

    rebuilt = tmp_path / "rebuilt"  # the store built again since: another build
    rebuilt.mkdir()
    built_again, fresh_parts = two_parts(project, rebuilt)
    build(project[0] / "c.yaml", built_again)
    refused(built_again, fresh_parts, "a part of another build of the store")


def test_a_shard_says_what_it_cannot_do_in_one_line(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    store = fresh(project, tmp_path)
    runner = CliRunner()
    base = ["render", str(store), "--tokenizer", str(REPO / "data" / "demo_tokenizer"), "--cutoff", "96"]
    one_line_error(runner.invoke(cli, [*base, "--shard", "2/2", "--parts", str(tmp_path / "p")]),
                   "shards are numbered 0 to N-1")
    one_line_error(runner.invoke(cli, [*base, "--shard", "x", "--parts", str(tmp_path / "p")]), "give R/N")
    one_line_error(runner.invoke(cli, [*base, "--shard", "0/2"]), "--parts DIR")
    one_line_error(runner.invoke(cli, [*base, "--parts", str(tmp_path / "p")]), "--parts and --address go with")
    one_line_error(runner.invoke(cli, ["merge", str(store), str(tmp_path / "none")]), "not a folder of render parts")
    with pytest.raises(RenderError, match="a shard is numbered from 0 to 1"):
        render_shard(request(store, tmp_path / "t"), 5, 2, tmp_path / "p")


@pytest.mark.slow  # a real PostgreSQL server
def test_a_postgresql_store_merges_as_a_file_does(project: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from dataidx.store import run_query

    from .postgres_server import running_server

    lengths = ("SELECT dataset, row, cut, tokens, supervised_tokens, status, full_tokens, detail, cause, reasoning "
               "FROM entry_lengths ORDER BY dataset, row, cut")
    with running_server() as server:
        url = f"{server}&schema=sharded"
        build(project[0] / "c.yaml", url)
        for shard in range(3):
            render_shard(request(url, tmp_path / "tokens"), shard, 3, tmp_path / "parts")  # type: ignore[arg-type]
        merge_parts(url, tmp_path / "parts")
        assert run_query(url, lengths)[1] == run_query(project[0] / "serial.db", lengths)[1]
        files = "SELECT entries, tokens, bytes, sha256 FROM token_files"
        assert run_query(url, files)[1] == run_query(project[0] / "serial.db", files)[1]


def test_a_template_that_reads_the_date_renders_every_shard_at_one_time(project: tuple[Path, dict[str, Any]],
                                                                         tmp_path: Path) -> None:
    """Each shard would read its own clock: one shard alone needs --clock, and the local runner
    gives all of them one (the spec's, or now), so the merge is one spec."""
    from dataidx.render.shards import render_in_shards, with_fixed_clock

    template = tmp_path / "dated.jinja"
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }} {{ strftime_now('%Y-%m-%d') }}\n"
                        "{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                        "{% endif %}", encoding="utf-8")
    store = fresh(project, tmp_path)
    dated = request(store, tmp_path / "tokens", template=str(template))
    with pytest.raises(RenderError, match="give every shard the same --clock"):
        render_shard(dated, 0, 2, tmp_path / "parts")
    fixed = with_fixed_clock(dated)
    assert fixed.clock is not None and with_fixed_clock(fixed) is fixed
    render_in_shards(dated, 2, tmp_path / "parts", processes=1)
    summary = merge_parts(store, tmp_path / "parts")
    assert summary.spec.clock is not None and summary.entries == project[1]["spec"][6]
    serial = tmp_path / "serial.db"
    shutil.copy(project[0] / "base.db", serial)
    render_store(request(serial, tmp_path / "serial.tokens", template=str(template), clock=summary.spec.clock))
    assert spec_state(store) == spec_state(serial)


def test_a_merge_elsewhere_finds_the_folders_the_shards_were_given(project: tuple[Path, dict[str, Any]],
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """Relative --tokenizer and --tokens-dir are recorded where the shard ran: a merge from
    another folder writes the token file where the shards were told, as a serial render would."""
    store = fresh(project, tmp_path)
    shutil.copytree(REPO / "data" / "demo_tokenizer", tmp_path / "tok")
    monkeypatch.chdir(tmp_path)
    relative = RenderRequest("s.db", "tok", cutoff=96, truncation="right", store_tokens=True, tokens_dir="words",
                             jobs=1)
    for shard in range(2):
        render_shard(relative, shard, 2, "parts")
    monkeypatch.chdir(tmp_path.parent)
    merge_parts(store, tmp_path / "parts")
    assert len(list((tmp_path / "words").glob("*.tokens"))) == 1
    assert spec_state(store)["entry_renders"] == project[1]["entry_renders"]


def test_a_postgresql_store_needs_a_parts_folder(tmp_path: Path) -> None:
    from dataidx.errors import UsageError
    from dataidx.render import run_shards

    with pytest.raises(UsageError, match="a PostgreSQL store has no folder for its parts: give --parts DIR"):
        run_shards(RenderRequest("postgresql://me@db/training?schema=sft", "tok", cutoff=8), 2)
    with pytest.raises(UsageError, match="--address names a Ray cluster"):
        run_shards(RenderRequest(tmp_path / "s.db", "tok", cutoff=8), 2, address="auto")

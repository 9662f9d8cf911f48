"""``--runner ray`` on a real local Ray cluster (one per module: it takes seconds to start): the
store it leaves is a serial render's, a Ctrl-C keeps the finished parts for the next run to skip,
a refused shard's error arrives as one line, and without Ray the runner says how to install it."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dataidx.cli import cli
from dataidx.errors import RenderError, UsageError
from dataidx.render import RenderRequest, merge_parts, render_store, run_shards
from dataidx.render.ray_runner import ray_cluster, render_on_ray

from .helpers import REPO

pytestmark = pytest.mark.slow

#: The tables a render fills, compared row for row (none holds a time).
TABLES = ("entry_renders", "render_statuses", "render_blocks", "length_chunks", "render_causes", "added_token_uses")
#: The demo tokenizer, as the README's commands name it (relative: tasks must work in our folder).
TOKENIZER = "data/demo_tokenizer"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local Ray cluster for the module, started as the runner starts its own; the runner
    finds it initialized and uses it. Started in an empty folder, where its workers start: a
    task finds the tests' relative paths only by working in the driver's folder."""
    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.chdir(tmp_path_factory.mktemp("ray-start"))
        ray = stack.enter_context(ray_cluster())
        patch.undo()
        yield ray
    assert not ray.is_initialized()


@pytest.fixture
def demo(demo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo store in a folder holding ``data/demo_tokenizer``, the working folder."""
    shutil.copytree(REPO / TOKENIZER, demo_copy.parent / TOKENIZER)
    monkeypatch.chdir(demo_copy.parent)
    return demo_copy


def request(store: Path | str) -> RenderRequest:
    return RenderRequest(store, TOKENIZER, cutoff=256, truncation="right", store_tokens=True)


def command(store: Path, *options: str) -> list[str]:
    """``dataidx render STORE ... --shards 2 --runner ray`` (the request of :func:`request`)."""
    return ["render", store.name, "--tokenizer", TOKENIZER, "--cutoff", "256", "--truncation", "right",
            "--store-tokens", "--shards", "2", "--runner", "ray", *options]


def render_on_the_command_line(store: Path) -> Result:
    return CliRunner().invoke(cli, command(store))


def serial(store: Path) -> Path:
    """A copy of ``store`` rendered in one process, as the reference."""
    copy = Path(shutil.copyfile(store, store.with_name("serial.db")))
    render_store(request(copy))
    return copy


def stored(store: Path) -> dict[str, Any]:
    """What a render left in ``store``: its tables' rows, the spec's counts, the token file."""
    with closing(sqlite3.connect(store)) as db:
        found: dict[str, Any] = {table: sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                                 for table in TABLES}
        found["render_specs"] = db.execute("SELECT name, fingerprint, entries, kept FROM render_specs").fetchall()
        found["spec_tokens"] = db.execute("SELECT file, word_bytes, entries, tokens, bytes, sha256 "
                                          "FROM spec_tokens").fetchall()
    file, = store.with_name(store.name + ".tokens").glob("*.tokens")
    found["token_file"] = file.read_bytes()
    assert found["entry_renders"] and found["render_specs"][0][3] > 0, "the demo rendered nothing: no comparison"
    return found


@pytest.mark.parametrize("shards", [2, 3, 7])
def test_a_ray_render_stores_what_a_serial_render_does(cluster: Any, demo: Path, shards: int) -> None:
    reference = stored(serial(demo))
    summary = run_shards(request(demo), shards, runner="ray", parts=demo.with_name("parts"))
    assert summary.entries == reference["render_specs"][0][2]
    assert stored(demo) == reference
    assert sorted(path.name for path in demo.with_name("parts").glob("*.json")) == [
        f"shard-{shard:05d}-of-{shards:05d}.json" for shard in range(shards)]


def test_the_cli_renders_on_ray_and_removes_its_parts(cluster: Any, demo: Path) -> None:
    reference = stored(serial(demo))
    result = render_on_the_command_line(demo)
    assert result.exit_code == 0, result.output
    assert stored(demo) == reference
    assert not demo.with_name(demo.name + ".parts").exists()


def test_the_cli_joins_the_cluster_at_address_quietly_and_leaves_it_up(cluster: Any, demo: Path) -> None:
    reference = stored(serial(demo))
    address = cluster.get_runtime_context().gcs_address
    result = subprocess.run([sys.executable, "-m", "dataidx", *command(demo, "--address", address, "-q")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "Ray's own lines reached a quiet render's stderr"
    assert stored(demo) == reference
    assert cluster.get(cluster.remote(lambda: "up").remote()) == "up"


def test_the_cli_starts_a_quiet_local_cluster_and_leaves_no_file_of_it(demo: Path) -> None:
    reference = stored(serial(demo))
    ray_files = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # short: a socket's path takes 107 bytes
    try:
        result = subprocess.run([sys.executable, "-m", "dataidx", *command(demo, "-q")], capture_output=True,
                                text=True, timeout=300, env={**os.environ, "RAY_TMPDIR": str(ray_files)})
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", "Ray's own lines reached a quiet render's stderr"
        assert list(ray_files.iterdir()) == [], "the local cluster left its files"
    finally:
        shutil.rmtree(ray_files)
    assert stored(demo) == reference


def test_a_temporary_folder_too_long_for_rays_sockets_is_said_in_one_line(demo: Path) -> None:
    long = demo.parent / ("x" * 100)
    long.mkdir()
    result = subprocess.run([sys.executable, "-m", "dataidx", *command(demo)], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "RAY_TMPDIR": str(long)})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "set RAY_TMPDIR to a short folder" in result.stderr, result.stderr
    assert list(long.iterdir()) == []


def test_ctrl_c_keeps_the_finished_parts_and_the_next_run_renders_only_the_rest(cluster: Any, demo: Path) -> None:
    shards, parts = 12, demo.with_name("parts")
    reference = stored(serial(demo))

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt  # as Ctrl-C while the driver waits, once a shard is done

    with pytest.raises(KeyboardInterrupt):
        run_shards(request(demo), shards, runner="ray", parts=parts, progress=interrupt)
    finished = {int(path.name.split("-")[1]) for path in parts.glob("shard-*.json")}
    assert finished, "the shard that finished before the interrupt left no part"
    assert not list(parts.glob(".*.tmp")), "a cancelled shard left its temporary files"
    outcomes = render_on_ray(request(demo), shards, parts)
    skipped = {outcome.shard for outcome in outcomes if outcome.skipped}
    assert [outcome.shard for outcome in outcomes] == list(range(shards))
    assert finished <= skipped, "a part finished before the interrupt was rendered again"
    assert len(skipped) < shards, "the interrupt cancelled nothing: every shard had finished"
    merge_parts(demo, parts)
    assert stored(demo) == reference


def test_a_refused_shard_fails_once_in_one_line(cluster: Any, demo: Path) -> None:
    """A shard of a template that reads the date, given no --clock, refuses in its task; the error
    reaches the caller as itself, in one line. (The command line gives every shard one clock.)"""
    dated = demo.with_name("dated.jinja")
    dated.write_text("{% for m in messages %}{{ strftime_now('%Y') }} {{ m.role }}: {{ m.content }}\n{% endfor %}"
                     "{% if add_generation_prompt %}assistant: {% endif %}", encoding="utf-8")
    with pytest.raises(RenderError, match="give every shard the same --clock") as refused:
        render_on_ray(replace(request(demo), template=str(dated)), 2, demo.with_name("parts"))
    assert type(refused.value) is RenderError and "\n" not in str(refused.value)
    render_store(request(demo))  # rendered already: the command line renders nothing, as a serial render
    result = render_on_the_command_line(demo)
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.output, result.output


def test_without_ray_the_runner_says_how_to_install_it(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    with pytest.raises(UsageError, match=r"pip install 'dataidx\[ray\]'"):
        render_on_ray(request(demo), 2, demo.with_name("parts"))
    result = render_on_the_command_line(demo)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "pip install 'dataidx[ray]'" in result.output, result.output

"""Issue 23, sources: the nesting check costs a warm build nothing, and a newcomer's mistakes in a
source (a local path left on the default hub source, a malformed JSON line, v0's pair rows) are
one line naming the file's line, or the cause and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataidx.index import build
from dataidx.sources import too_deep

from .helpers import write_jsonl, write_yaml

ROWS = [{"instruction": f"say {i}", "input": "", "output": f"{i}"} for i in range(5)]
DEEP = '{"instruction": "x", "input": "", "output": "y", "extra": ' + "[" * 20_000 + "]" * 20_000 + "}"


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m dataidx ...`` in a process of its own (the HF cache of the tests, offline)."""
    return subprocess.run([sys.executable, "-m", "dataidx", *map(str, args)], capture_output=True, text=True,
                          timeout=180, cwd=cwd)


def refused(found: subprocess.CompletedProcess, message: str) -> None:
    """Exit 1 and exactly ``message`` on stderr, one line, no traceback."""
    assert (found.returncode, found.stderr) == (1, message + "\n"), (found.returncode, found.stderr)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the nesting check reads, in order, through a wrapper of our own function."""
    seen: list[str] = []
    real = too_deep

    def counting(path: str, *args: object, **kwargs: object) -> int | None:
        seen.append(os.path.basename(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr("dataidx.sources.loaders.too_deep", counting)  # where refuse_unreadable_json finds it
    return seen


def test_a_warm_build_does_not_scan_a_file_the_cache_already_holds(tmp_path: Path, scans: list[str]) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", ROWS)
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    build(config, tmp_path / "1.db")
    assert scans == ["a.jsonl"]  # parsed into the cache: checked first
    build(config, tmp_path / "2.db")
    assert scans == ["a.jsonl"]  # the cache holds the prepared split: pyarrow never reads the file
    write_jsonl(data, ROWS[:3])  # changed (a new mtime): parsed again, so checked again
    build(config, tmp_path / "3.db")
    assert scans == ["a.jsonl", "a.jsonl"]
    build(config, tmp_path / "4.db")
    assert scans == ["a.jsonl", "a.jsonl"]


@pytest.mark.slow
def test_a_file_changed_with_its_mtime_put_back_is_still_checked_before_pyarrow(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", ROWS)
    config = write_yaml(tmp_path / "c.yaml", f"a:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    assert cli("build", config, "-o", tmp_path / "1.db", "-q").returncode == 0
    stat = data.stat()
    data.write_text("\n".join([json.dumps(ROWS[0]), DEEP, json.dumps(ROWS[1])]) + "\n")
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # cp -p, rsync -a: the cache key is unchanged
    refused(cli("build", config, "-o", tmp_path / "2.db", "-q"),
            f"Error: dataset 'a': {data}: line 2: JSON nested deeper than 500 levels; no dataset needs that, "
            "and the JSON reader cannot take it")


@pytest.mark.slow
def test_a_local_file_left_on_the_default_hub_source_is_named_with_its_fix(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "x.json", ROWS)  # LLaMA-Factory's .json files are often JSON lines
    write_yaml(tmp_path / "c.yaml", "demo:\n  path: data/x.json\n  converter: alpaca\n")  # no source: hf_hub
    refused(cli("build", "c.yaml", "-o", "s.db", "-q", cwd=tmp_path),
            f"Error: dataset 'demo': {tmp_path / 'data' / 'x.json'} is a local file, but the source is hf_hub "
            "(the default, for hub datasets); add 'source: local' to dataset 'demo' to read it")
    write_yaml(tmp_path / "ok.yaml", "demo:\n  path: data/x.json\n  source: local\n  converter: alpaca\n")
    assert cli("build", "ok.yaml", "-o", "s.db", "-q", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_a_mistyped_local_path_on_the_default_hub_source_is_one_line_and_never_asks_the_hub(tmp_path: Path) -> None:
    import http.server
    import threading

    asked: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        """A hub on this machine that knows no dataset: it counts what it is asked."""

        def do_HEAD(self) -> None:
            asked.append(self.path)
            self.send_error(404)

        do_GET = do_HEAD

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    online = {key: value for key, value in os.environ.items() if key not in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")}
    online["HF_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    write_jsonl(tmp_path / "data" / "x.json", ROWS)
    here = os.path.realpath(tmp_path)

    def build_with(path: str) -> subprocess.CompletedProcess:
        write_yaml(tmp_path / "c.yaml", f"demo:\n  path: {path}\n  converter: alpaca\n")  # no source: hf_hub
        return subprocess.run([sys.executable, "-m", "dataidx", "build", "c.yaml", "-o", "s.db", "-q"], env=online,
                              cwd=tmp_path, capture_output=True, text=True, timeout=180)

    try:
        refused(build_with("data/y.json"), f"Error: dataset 'demo': data/y.json: no such file or folder in {here} "
                "(did you mean data/x.json?); it names a .json file, not a hub dataset, so the hub was not asked (a "
                "local path also needs 'source: local')")
        refused(build_with("data/folder"), f"Error: dataset 'demo': data/folder: no such file or folder in {here}; "
                "data/ is a local folder here, not a hub owner, so the hub was not asked (a local path also needs "
                "'source: local')")
        assert asked == []  # 25 s of retries and 13 lines offline before
        assert build_with("someone/some_dataset").returncode == 1 and asked  # a hub id is the hub's to answer
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("where", [1, 7000])  # in the first 10 MiB chunk datasets reads, and in a later one
def test_a_malformed_json_lines_row_is_named_by_its_line_and_column(tmp_path: Path, where: int) -> None:
    lines = [json.dumps({**ROWS[0], "output": "x" * 2000}) for _ in range(where + 3)]
    lines[where + 1] = '{"instruction": "a", "input": "", "output": "b",}'  # a trailing comma
    data = tmp_path / "bad.jsonl"
    data.write_text("\n".join(lines) + "\n")
    config = write_yaml(tmp_path / "c.yaml", f"bad:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    refused(cli("build", config, "-o", tmp_path / "s.db", "-q"),
            f"Error: dataset 'bad': {data}: line {where + 2}, column 49: not valid JSON "
            "(Expecting property name enclosed in double quotes)")


@pytest.mark.slow
def test_a_malformed_json_array_file_is_named_by_its_line_and_column(tmp_path: Path) -> None:
    data = tmp_path / "bad.json"
    data.write_text('[\n  {"instruction": "a", "input": "", "output": "b"},\n'
                    '  {"instruction": "a", "input": "" "output": "b"}\n]\n')  # a missing comma
    config = write_yaml(tmp_path / "c.yaml", f"bad:\n  path: {data}\n  source: local\n  converter: alpaca\n")
    refused(cli("build", config, "-o", tmp_path / "s.db", "-q"),
            f"Error: dataset 'bad': {data}: line 3, column 36: not valid JSON (Expecting ',' delimiter)")


@pytest.mark.slow
def test_pair_rows_in_v0s_shape_are_explained_not_a_type_error(tmp_path: Path) -> None:
    rows = [{"instruction": f"q{i}", "input": "", "chosen": "good", "rejected": "bad"} for i in range(3)]
    data = write_jsonl(tmp_path / "rank.jsonl", rows)
    config = write_yaml(tmp_path / "c.yaml", f"rank:\n  path: {data}\n  source: local\n  converter: pair\n")
    refused(cli("build", config, "-o", tmp_path / "s.db", "-q"),
            "Error: dataset 'rank', row 0, converter 'pair': chosen and rejected are strings: ranking "
            "data in LLaMA-Factory v0's shape (single answers); v1's pair converter needs each side as a list of "
            '{role, content} messages, the prompt included (e.g. chosen: [{"role": "user", "content": "<prompt>"}, '
            '{"role": "assistant", "content": "<answer>"}])')

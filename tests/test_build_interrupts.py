"""Issue 50, item 17 (build): Ctrl-C during a build says, in one line, that nothing was written;
Ctrl-C over a finished build says the store is complete, or ends the process quietly once the
command is over, never with click's bare "Aborted!" or a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx import DataEngine
from dataidx.cli import cli

from .helpers import REPO, alpaca_rows, write_jsonl, write_yaml

pytestmark = pytest.mark.slow  # the dataidx script in processes of its own, and signals

# A converter that presses Ctrl-C on the build's first row: the interrupt lands inside the work.
PRESSES_CTRL_C = """
import os, signal
from dataidx import register_converter
from dataidx.convert import converters

alpaca = converters.get("alpaca").func

@register_converter("presses_ctrl_c")
def presses_ctrl_c(row):
    os.kill(os.getpid(), signal.SIGINT)
    return alpaca(row)
"""

# Ctrl-C while the interpreter shuts down after the command: atexit handlers run last-registered
# first, so this one runs before those of multiprocessing and datasets, where it printed a traceback.
AT_EXIT = """
import atexit, os, signal, sys, time
atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(5)))
from dataidx.cli import main
sys.argv = ["dataidx", *sys.argv[1:]]
main()
"""


def _as_from_a_terminal() -> None:
    """SIGINT at its default and unblocked, whatever the test process inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def dataidx(*args: object, cwd: Path, script: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", script, *map(str, args)] if script else [sys.executable, "-m", "dataidx",
                                                                               *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=180,
                          preexec_fn=_as_from_a_terminal)


def test_ctrl_c_during_a_build_says_in_one_line_that_nothing_was_written(tmp_path: Path) -> None:
    (tmp_path / "plug.py").write_text(PRESSES_CTRL_C)
    write_jsonl(tmp_path / "a.jsonl", alpaca_rows(5))
    write_yaml(tmp_path / "ok.yaml", "a:\n  path: a.jsonl\n  source: local\n  converter: alpaca\n")
    write_yaml(tmp_path / "c.yaml", "a:\n  path: a.jsonl\n  source: local\n  converter: presses_ctrl_c\n")
    stopped = dataidx("--plugins", "plug.py", "build", "c.yaml", "-o", "s.db", "-q", cwd=tmp_path)
    assert (stopped.returncode, stopped.stderr) == (
        130, "Interrupted: the build was stopped; nothing was written (there is no store at s.db)\n")  # "Aborted!"
    assert not (tmp_path / "s.db").exists()
    assert dataidx("build", "ok.yaml", "-o", "s.db", "-q", cwd=tmp_path).returncode == 0
    before = (tmp_path / "s.db").read_bytes()
    stopped = dataidx("--plugins", "plug.py", "build", "c.yaml", "-o", "s.db", "-q", cwd=tmp_path)
    assert (stopped.returncode, stopped.stderr) == (
        130, "Interrupted: the build was stopped; nothing was written (s.db is as it was)\n")
    assert (tmp_path / "s.db").read_bytes() == before


def test_ctrl_c_over_a_finished_build_says_the_store_is_complete(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def pressed(*args: object) -> str:  # Ctrl-C as the summary is printed, the store already in place
        raise KeyboardInterrupt

    monkeypatch.setattr("dataidx.cli.write_commands.table", pressed)
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["build", "data/demo_sft.yaml", "-o", str(tmp_path / "s.db")])
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        130, f"Interrupted: {tmp_path / 's.db'} was written before the build was stopped: the store is complete")
    with DataEngine(tmp_path / "s.db") as engine:
        assert len(engine) == 37


def test_ctrl_c_after_a_build_while_the_process_exits_ends_it_without_a_traceback(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", alpaca_rows(5))
    write_yaml(tmp_path / "c.yaml", "a:\n  path: a.jsonl\n  source: local\n  converter: alpaca\n")
    ended = dataidx("build", "c.yaml", "-o", "s.db", cwd=tmp_path, script=AT_EXIT)
    assert ended.returncode == -signal.SIGINT, ended.stderr  # as Ctrl-C ends any program: 130 in a shell
    assert "Traceback" not in ended.stderr  # and exit 0: a traceback from multiprocessing's atexit handler before
    assert ended.stderr.splitlines()[-1].startswith(f"wrote {os.path.realpath(tmp_path / 's.db')}: ")
    with DataEngine(tmp_path / "s.db") as engine:
        assert len(engine) == 5

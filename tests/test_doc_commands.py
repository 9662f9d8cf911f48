"""Every shell command in the README and docs runs as written on the demo: the README's from a
folder holding only the repository's ``data/`` (and the templates its commands name), in the order
a reader meets them, with the README's Python between them (one namespace, as a reader's session),
then each other page's commands from where the README leaves the demo.

Commands are in ``bash`` fences; a ``text`` fence holds usage lines with placeholders, and no
other fence holds a line that starts ``dataidx``. ``dataidx`` commands run in this process through click, as the
installed command would run them; the few commands that cannot run here say why in
:data:`NOT_RUN`."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataidx.cli import cli

from .helpers import REPO

pytestmark = pytest.mark.slow

#: Fences whose lines are shell commands.
SHELL = ("bash", "sh", "shell")
#: Commands (their first words) the test does not run, and why.
NOT_RUN: dict[tuple[str, ...], str] = {
    ("python3", "-m", "venv"): "installing is what .ci/run does, from scratch",
    (".", ".venv/bin/activate"): "installing is what .ci/run does, from scratch",
    ("pip", "install"): "installing is what .ci/run does, from scratch",
    ("ruff", "check"): "the test command: this is one of its tests",
    ("pyright",): "the test command: this is one of its tests",
    ("python", "-m", "pytest"): "the test command: this is one of its tests",
    ("python", "scripts/bench.py"): "minutes of benchmark; tests/test_scripts.py runs its smoke",
    ("dataidx", "build", "data/demo_sft.yaml", "-o", "postgresql://me@db/training?schema=sft"):
        "a server named db; docs/postgres.md's commands run below against a private server",
}
#: The README first: the other pages start from the demo as it leaves it.
PAGES = ("README.md", *sorted(str(page.relative_to(REPO)) for page in (REPO / "docs").glob("*.md")))


def fences(page: str) -> list[tuple[str, str]]:
    """``(language, text)`` of each fenced block of a page."""
    return re.findall(r"^```(\S*)\n(.*?)^```", (REPO / page).read_text(encoding="utf-8"), flags=re.S | re.M)


def lines_of(block: str) -> list[str]:
    """A shell block's commands, one per line (a trailing backslash joins the next), comments kept
    for shlex to drop."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def shell_lines(page: str) -> list[str]:
    """The page's shell commands, in order."""
    return [line for language, block in fences(page) if language in SHELL for line in lines_of(block)]


def commands(line: str, environment: dict[str, str]) -> Iterator[list[str]]:
    """The commands of one line as argument lists: split at ``;`` and ``&&``, ``$NAME`` expanded."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&")
    lexer.whitespace_split = True
    command: list[str] = []
    for word in lexer:
        if word in (";", "&&"):
            yield command
            command = []
        else:
            command.append(re.sub(r"\$(\w+)", lambda found: environment[found.group(1)], word))
    if command:
        yield command


def not_run(command: list[str]) -> str | None:
    """Why the test leaves ``command`` out, or None when it runs it."""
    return next((why for words, why in NOT_RUN.items() if tuple(command[: len(words)]) == words), None)


def serve(command: list[str], folder: Path) -> None:
    """``dataidx serve`` runs until stopped: it must answer its home page, then it is stopped."""
    port = command[command.index("--port") + 1]
    server = subprocess.Popen([sys.executable, "-m", "dataidx", *command[1:]], cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/demo", timeout=5) as answer:
                    assert answer.status == 200
                    return
            except OSError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, f"{shlex.join(command)} did not answer in 120 s"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_page(page: str, folder: Path, environment: dict[str, str], overrides: dict[str, str], *,
             python: dict[str, object] | None = None) -> list[str]:
    """Run a page's commands in ``folder`` (and with ``python``, a namespace, its Python blocks
    too, where they stand); the commands run (as text)."""
    ran = []
    for language, block in fences(page):
        if language == "python" and python is not None:
            exec(compile(block, page, "exec"), python)  # the README's own code, as a reader runs it
            continue
        if language in SHELL:
            ran += run_lines(page, lines_of(block), folder, environment, overrides)
    return ran


def run_lines(page: str, lines: list[str], folder: Path, environment: dict[str, str],
              overrides: dict[str, str]) -> list[str]:
    """Run shell lines of a page in ``folder``; the commands run (as text)."""
    ran = []
    for line in lines:
        for command in commands(line, environment):
            if not_run(command):
                continue
            if command[0] == "export":
                name, value = command[1].split("=", 1)
                environment[name] = overrides.get(name, value)
            elif command[:2] == ["dataidx", "serve"]:
                serve(command, folder)
            else:
                assert command[0] == "dataidx", f"{page}: {shlex.join(command)}: say in NOT_RUN why it is not run"
                result = CliRunner().invoke(cli, command[1:], env={"DATAIDX_CACHE": str(folder / "cache")})
                assert result.exit_code == 0, f"{page}: {shlex.join(command)} exited {result.exit_code}:\n" \
                                              f"{result.output}"
            ran.append(shlex.join(command))
    return ran


@pytest.fixture(scope="module")
def readme_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """The README's commands run in a fresh folder: the folder and what ran."""
    folder = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "data", folder / "data")
    shutil.copytree(REPO / "tests" / "conformance" / "families", folder / "tests" / "conformance" / "families")
    old, cache = Path.cwd(), os.environ.get("DATAIDX_CACHE")
    os.chdir(folder)
    os.environ["DATAIDX_CACHE"] = str(folder / "cache")  # DataEngine("data/demo_sft.yaml") builds there
    python: dict[str, object] = {}
    try:
        yield folder, run_page("README.md", folder, {}, {}, python=python)
    finally:
        for engine in [value for value in python.values() if hasattr(value, "close") and not isinstance(value, type)]:
            engine.close()  # type: ignore[attr-defined]
        os.chdir(old)
        if cache is None:
            os.environ.pop("DATAIDX_CACHE", None)
        else:
            os.environ["DATAIDX_CACHE"] = cache


def test_every_readme_command_runs_as_written_on_the_demo(readme_demo: tuple[Path, list[str]]) -> None:
    folder, ran = readme_demo
    assert "dataidx build data/demo_sft.yaml -o demo.db" in ran and len(ran) > 25
    assert (folder / "report.html").is_file() and (folder / "megatron").is_dir()


@pytest.mark.parametrize("page", [page for page in PAGES[1:] if page != "docs/postgres.md"])
def test_every_command_of_a_page_runs_as_written_where_the_readme_leaves_the_demo(
        readme_demo: tuple[Path, list[str]], tmp_path: Path, page: str) -> None:
    folder = tmp_path / "demo"
    for kept in ("data", "tests", *(path.name for path in readme_demo[0].glob("demo.db*"))):  # not its outputs
        copy = shutil.copytree if (readme_demo[0] / kept).is_dir() else shutil.copyfile
        copy(readme_demo[0] / kept, folder / kept)
    old = Path.cwd()
    os.chdir(folder)
    try:
        run_page(page, folder, {}, {})
    finally:
        os.chdir(old)


def test_the_postgres_pages_commands_run_against_a_server(tmp_path: Path) -> None:
    """docs/postgres.md's commands, its STORE a schema of a private server instead of db.internal."""
    from .postgres_server import running_server

    shutil.copytree(REPO / "data", tmp_path / "data")
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        with running_server() as url:
            ran = run_page("docs/postgres.md", tmp_path, {}, {"STORE": f"{url}&schema=docs"})
    finally:
        os.chdir(old)
    assert any(command.startswith("dataidx pack") for command in ran)


@pytest.mark.parametrize("page", PAGES)
def test_commands_are_in_fences_the_test_runs(page: str) -> None:
    """A command in an unlabelled fence would be left out in silence: only usage lines (``text``)
    may stand outside a shell fence."""
    for language, block in fences(page):
        if language not in (*SHELL, "text"):
            assert not re.search(r"^\s*dataidx ", block, flags=re.M), f"{page}: a ```{language} fence holds a command"


@pytest.mark.parametrize("page", PAGES)
def test_every_command_a_page_does_not_run_says_why(page: str) -> None:
    """Nothing is left out in silence: each skipped command matches a NOT_RUN entry."""
    for line in shell_lines(page):
        for command in commands(line, {"STORE": "postgresql://x"}):
            assert command[0] in ("dataidx", "export") or not_run(command), f"{page}: {shlex.join(command)}"

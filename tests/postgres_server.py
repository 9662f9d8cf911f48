"""A throwaway PostgreSQL server for the tests: initdb into a temporary folder, a Unix socket only.

The server binaries come from the Debian ``postgresql`` package (``.ci/run`` installs it). Where
they are missing the PostgreSQL tests skip, unless ``DATAIDX_REQUIRE_POSTGRES`` is set (CI sets
it), in which case they fail: CI never passes by skipping them.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, newest major version first."""
    found = shutil.which("pg_ctl")
    candidates = ([Path(found).parent] if found else []) + [
        Path(folder) for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_server() -> Iterator[str]:
    """Start a server; yields the SQLAlchemy URL of its ``postgres`` database (superuser, trust)."""
    binaries = server_binaries()
    if binaries is None:
        message = "PostgreSQL server binaries are not installed (apt-get install postgresql)"
        if os.environ.get("DATAIDX_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="dataidx-pg-"))  # short: a socket path has a 107-byte limit
    as_owner: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(folder, "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_owner, *command], check=True, capture_output=True, text=True)

    try:
        run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        run(str(binaries / "pg_ctl"), "-D", str(data), "-w", "-l", str(folder / "log"), "-o",
            f"-k {folder} -p {port} -c listen_addresses='' -c fsync=off -c full_page_writes=off", "start")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"cannot start PostgreSQL: {exc.stderr or exc.stdout}")
    try:
        yield f"postgresql://postgres@/postgres?host={folder}&port={port}"
    finally:
        subprocess.run([*as_owner, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)

"""pyright and the package faces: every name a face lists imports cleanly, a misspelled one fails.

One small file imports each face's names, and a misspelled name, from every face; pyright checks
it twice. Once as this checkout's code, under the project's config (pyright finds ``src``): a
lazy face's module ``__getattr__`` must not let an unknown name through. Once as a user's checker
sees an installed, ``py.typed`` dataidx (the package in a site-packages folder), where a face's
imports count only if the face exports them.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO

SOURCE = REPO / "src" / "dataidx"
#: The root and each stage package: what other packages, tests, docs and users import from.
FACES = ["dataidx", *sorted(f"dataidx.{path.parent.name}" for path in SOURCE.glob("*/__init__.py"))]
MISSPELLED = "no_such_name"


def probe(folder: Path) -> tuple[Path, dict[int, str], dict[int, str]]:
    """A file importing every face's names (one line per face) and a misspelled name (another
    line per face); the lines (0-based, as pyright counts them) that hold each."""
    lines, real, misspelled = [], {}, {}
    for face in FACES:
        names = importlib.import_module(face).__all__
        assert names, f"{face} lists no names"
        real[len(lines)] = face
        lines.append(f"from {face} import {', '.join(names)}")
        misspelled[len(lines)] = face
        lines.append(f"from {face} import {MISSPELLED}")
    path = folder / "probe.py"
    path.write_text("\n".join(lines) + "\n")
    return path, real, misspelled


def pyright(*arguments: str | Path, cwd: Path) -> list[dict]:
    """pyright's diagnostics, as its JSON output lists them."""
    done = subprocess.run([sys.executable, "-m", "pyright", "--outputjson", *map(str, arguments)],
                          cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr or done.stdout  # 1: errors were found
    return json.loads(done.stdout)["generalDiagnostics"]


def by_line(diagnostics: list[dict]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for diagnostic in diagnostics:
        found.setdefault(diagnostic["range"]["start"]["line"], []).append(
            f"{diagnostic['severity']}: {diagnostic['message']} ({diagnostic.get('rule')})")
    return found


def refused(found: dict[int, list[str]], real: dict[int, str]) -> dict[str, str]:
    """Faces whose listed names pyright refused: how many, and the first refusal."""
    return {face: f"{len(found[line])} names, first {found[line][0]!r}" for line, face in real.items() if line in found}


def unknown(messages: list[str]) -> bool:
    return any(f'"{MISSPELLED}" is unknown import symbol' in message for message in messages)


@pytest.mark.slow
def test_a_misspelled_import_from_any_face_fails_pyright(tmp_path: Path) -> None:
    path, real, misspelled = probe(tmp_path)
    found = by_line(pyright("--project", REPO / "pyproject.toml", "--pythonpath", sys.executable, path, cwd=REPO))
    passed = [face for line, face in misspelled.items() if not unknown(found.get(line, []))]
    assert not passed, f"pyright let a misspelled import through from {passed}"
    assert not refused(found, real), f"pyright refused names these faces list: {refused(found, real)}"


@pytest.mark.slow
def test_an_installed_dataidx_exports_every_name_its_faces_list(tmp_path: Path) -> None:
    """As a user's pyright reads dataidx from site-packages: each listed name is public (not a
    private import of the face), and a misspelled one is still unknown."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = tmp_path / "env" / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    (site / "dataidx").symlink_to(SOURCE, target_is_directory=True)
    assert (site / "dataidx" / "py.typed").is_file()
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(
        {"venvPath": str(tmp_path), "venv": "env", "pythonVersion": version}))
    path, real, misspelled = probe(tmp_path)
    found = by_line(pyright(path, cwd=tmp_path))
    passed = [face for line, face in misspelled.items() if not unknown(found.get(line, []))]
    assert not passed, f"pyright let a misspelled import through from {passed}"
    faces = refused(found, real)
    assert not faces, f"an installed dataidx does not export names its faces list: {faces}"

"""Where a command may write a file of its own (a report, an export, a YAML): never over the
store, the files the store was built from or the command's own input, and over an existing
file only if it is of the kind the command writes (or with ``force``).

``dataidx report -o demo.db`` or ``dataidx export -o data/train.jsonl`` is one slip of the
keyboard; the file it would replace may be the only copy of a store or a dataset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from ..errors import StoreError, UsageError
from .connect import open_any_revision
from .location import PostgresStore, store_location, tokens_folder
from .specs.token_files import TOKENS_SINCE

#: How much of an existing file is read to tell its kind.
_PEEK = 1 << 20


def check_output(output: str | os.PathLike[str], kind: str, *, store: str | os.PathLike[str] | None = None,
                 reads: Iterable[str | os.PathLike[str]] = (), force: bool = False) -> None:
    """Refuse (UsageError) to write ``output`` over ``store``, a source file of it, a file in
    ``reads``, or (unless ``force``) an existing file that is not of ``kind`` (html, jsonl,
    parquet, yaml); kind ``folder`` is :func:`check_output_folder`'s (a folder written whole).

    Example::

        check_output("report.html", "html", store="demo.db")
    """
    if kind == "folder":
        if store is None:
            raise UsageError(f"{output}: a folder output is checked against the store it is written from")
        check_output_folder(output, store=store, force=force)
        return
    target = Path(output)
    if not target.exists():
        return
    protected = [(path, "the command reads it") for path in reads]
    if store is not None:
        location = store_location(store)
        if not isinstance(location, PostgresStore):
            protected.append((location, "it is the store"))
        sources, token_files = _recorded(store)
        protected += [(path, "the store was built from it" if name is None else
                       f"dataset '{name}' of the store was built from it") for name, path in sources]
        protected += [(path, f"it is the token file of spec '{spec}'") for spec, path in token_files]
    for path, why in protected:
        if _same_file(target, path):
            raise UsageError(f"{output}: refusing to write over it: {why}; choose another output")
    if not force and not _of_kind(target, kind):
        raise UsageError(f"{output} exists and is not {_KINDS[kind]}; refusing to overwrite it "
                         "(choose another output, or pass --force)")


def check_output_folder(output: str | os.PathLike[str], *, store: str | os.PathLike[str],
                        force: bool = False) -> None:
    """Refuse (UsageError) to write folder ``output`` where a file is, over a folder holding the
    store, a source file of it or a token file of its specs, over its token folder, or (unless
    ``force``) over a folder that is not empty.

    Example::

        check_output_folder("export/", store="demo.db")
    """
    target = Path(output)
    if not target.parent.is_dir():
        raise UsageError(f"{output}: folder {target.parent} does not exist")
    if not target.exists():
        return
    if not target.is_dir():
        raise UsageError(f"{output} exists and is not a folder; choose another output folder")
    location = store_location(store)
    sources, token_files = _recorded(store)
    held = [] if isinstance(location, PostgresStore) else [(Path(location), "the store")]
    held += [(Path(path), "a file the store was built from") for _, path in sources]
    held += [(path, f"the token file of spec '{spec}'") for spec, path in token_files]
    # Its token folder even with no file in it yet: a link to a bigger disk is the whole of it.
    held.append((tokens_folder(location), "the store's token folder"))
    for path, what in held:
        if (os.path.realpath(path) + os.sep).startswith(os.path.realpath(target) + os.sep):
            raise UsageError(f"{output}: refusing to write over it: it holds {what} ({path}); choose another folder")
    if not force and any(target.iterdir()):
        raise UsageError(f"{output} exists and is not empty; refusing to overwrite it (choose another folder, or "
                         "pass --force)")


_KINDS = {"html": "an HTML file", "jsonl": "a JSON lines file", "parquet": "a Parquet file", "yaml": "a YAML file"}


def _recorded(store: str | os.PathLike[str]) -> tuple[list[tuple[str | None, str]], list[tuple[str, Path]]]:
    """What the store names on disk: ``(dataset, file)`` for every file its datasets were read
    from and ``(None, file)`` for the YAML it was built from; ``(spec, file)`` for every token file."""
    try:
        connection, revision = open_any_revision(store)
    except StoreError:
        return [], []
    try:
        rows = connection.execute("SELECT name, files FROM datasets ORDER BY position").fetchall()
        configs = connection.execute("SELECT config_origin FROM builds").fetchall()
        tokens = connection.execute(
            "SELECT s.name, t.file, t.folder FROM spec_tokens AS t JOIN render_specs AS s ON s.id = t.spec_id "
            "ORDER BY s.id").fetchall() if revision is not None and revision >= TOKENS_SINCE else []
    finally:
        connection.close()
    found: list[tuple[str | None, str]] = [(None, origin) for (origin,) in configs if origin]
    for name, files in rows:
        for entry in (json.loads(files) if isinstance(files, str) else files) or []:
            found.append((name, entry["path"]))
    own = tokens_folder(store_location(store))
    return found, [(spec, (Path(folder) if folder else own) / file) for spec, file, folder in tokens]


def _same_file(a: Path, b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _of_kind(path: Path, kind: str) -> bool:
    """Whether an existing file already holds what ``kind`` writes (an empty file holds anything)."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        head = handle.read(_PEEK)
    if not head:
        return True
    if kind == "parquet":
        return head.startswith(b"PAR1")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a character cut at the end of the peek
            return False
        text = head[: exc.start].decode("utf-8-sig")
    if kind == "html":
        return text.lstrip().lower().startswith(("<!doctype html", "<html"))
    if kind == "jsonl":
        first = text.lstrip().split("\n", 1)[0]
        try:
            return isinstance(json.loads(first), dict)
        except json.JSONDecodeError:
            return len(first) == len(text.lstrip()) and first.startswith("{")  # a first line past the peek
    # yaml: a dataset YAML, a mapping of names to mappings (a README or a JSON file is not one)
    if len(head) == _PEEK or text.lstrip().startswith(("{", "[")):
        return False  # no dataset YAML is that long; JSON is YAML too, but not a file this writes
    try:
        parsed = yaml.safe_load(text)
    except Exception:  # any file PyYAML cannot read (deep nesting included) is not one
        return False
    return parsed is None or (isinstance(parsed, dict) and all(isinstance(v, dict) for v in parsed.values()))

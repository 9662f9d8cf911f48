"""Why a source did not load, in the words a user acts on.

``datasets`` reports a malformed JSON line by pyarrow's row within a 10 MiB chunk or ujson's
byte offset within a re-encoded one, and a local file left on the default ``hf_hub`` source as
"Couldn't find any data file" at a path that exists. The first is found again here in the file
itself, by line (and column); the second is named with its fix. Anything else keeps its root
cause. A mistyped local path on the hub source is named before the hub is asked at all
(offline, the hub's retries took 25 s and 13 lines).
"""

from __future__ import annotations

import codecs
import difflib
import json
import os
import re
from collections.abc import Collection, Iterator, Sequence

from ..spec import DatasetSpec


def why_not_loaded(spec: DatasetSpec, exc: BaseException, files: Sequence[str]) -> str:
    """One line for ``spec``'s load failing with ``exc``; ``files`` are its local source files."""
    causes = list(_chain(exc))
    if any(isinstance(cause, FileNotFoundError) for cause in causes):
        hint = _local_path_on_hub(spec)
        if hint:
            return hint
    if any(isinstance(cause, ValueError) for cause in causes):  # pyarrow's ArrowInvalid and ujson's are
        for path in files:
            if path.endswith((".json", ".jsonl")) and (found := malformed_json(path)):
                return f"dataset '{spec.name}': {path}: {found}"
    through = "" if spec.source in ("local", "hf_hub") else f" through source '{spec.source}'"
    return f"dataset '{spec.name}': cannot load {spec.path}{through}: {root_cause(exc)}"


def _local_path_on_hub(spec: DatasetSpec) -> str | None:
    if spec.source != "hf_hub" or not (os.path.isfile(spec.path) or _holds_files(spec.path)):
        return None
    kind = "file" if os.path.isfile(spec.path) else "folder"
    return (f"dataset '{spec.name}': {spec.path} is a local {kind}, but the source is hf_hub (the default, "
            f"for hub datasets); add 'source: local' to dataset '{spec.name}' to read it")


#: A hub dataset id: NAME or OWNER/NAME, of letters, digits, ``-``, ``_`` and ``.``, as the hub allows.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
#: A folder with more names than this is not searched for the one a typo meant.
_NAMES_COMPARED = 10_000


def local_path_not_found(spec: DatasetSpec, extensions: Collection[str]) -> str | None:
    """One line for a path on the ``hf_hub`` source that is not on disk and cannot be a hub id,
    decided from its shape and what exists, so the hub is never asked for it; None otherwise.
    ``extensions`` are the data files' (``.json`` names a file, never a hub dataset)."""
    path = spec.path
    if spec.source != "hf_hub" or os.path.lexists(path):
        return None
    first, extension = path.split("/", 1)[0], os.path.splitext(path)[1].lstrip(".").lower()
    if os.path.isabs(path) or path.startswith(("./", "../", "~")) or not _HUB_ID.fullmatch(path):
        why = "it is a local path, not a hub dataset id (NAME or OWNER/NAME)"
    elif extension in extensions:
        why = f"it names a .{extension} file, not a hub dataset"
    elif "/" in path and os.path.isdir(first):
        why = f"{first}/ is a local folder here, not a hub owner"
    else:
        return None
    where = "" if os.path.isabs(path) else f" in {os.getcwd()}"
    return (f"dataset '{spec.name}': {path}: no such file or folder{where}{_meant(path)}; {why}, so the hub was not "
            "asked (a local path also needs 'source: local')")


def _meant(path: str) -> str:
    """`` (did you mean X?)`` naming the closest name beside where ``path`` points, or nothing."""
    folder, name = os.path.split(path)
    try:
        with os.scandir(folder or ".") as found:
            names = [entry.name for _, entry in zip(range(_NAMES_COMPARED + 1), found)]
    except OSError:
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8) if len(names) <= _NAMES_COMPARED else []
    return f" (did you mean {os.path.join(folder, close[0])}?)" if close else ""


def _holds_files(path: str) -> bool:
    return os.path.isdir(path) and any(names for _, _, names in os.walk(path))


def malformed_json(path: str) -> str | None:
    """Where ``path`` stops being JSON, as ``line L, column C: not valid JSON (why)``: a file
    whose text starts with ``[`` is one array, any other holds one object per line (as
    ``datasets`` reads them). None when every line is well formed."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16).removeprefix(codecs.BOM_UTF8).lstrip()
    if head.startswith(b"["):
        with open(path, "rb") as handle:
            body = handle.read().removeprefix(codecs.BOM_UTF8)
        try:
            json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return f"{_place(body, exc.start)} is not UTF-8 text"
        except json.JSONDecodeError as exc:
            return f"line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})"
        return None
    for number, line in _lines(path):
        try:
            value = json.loads(line.rstrip(b"\r\n").decode("utf-8"))  # the error stays on this line
        except UnicodeDecodeError as exc:
            return f"line {number}, byte {exc.start + 1} is not UTF-8 text"
        except json.JSONDecodeError as exc:
            return f"line {number}, column {exc.colno}: not valid JSON ({exc.msg})"
        if not isinstance(value, dict):
            return f"line {number}: a JSON {type(value).__name__}, not an object (one row is one {{...}} per line)"
    return None


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    """The file's lines that are not blank, with their 1-based numbers; a BOM is not text."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if number == 1:
                line = line.removeprefix(codecs.BOM_UTF8)
            if line.strip():
                yield number, line


def _place(data: bytes, offset: int) -> str:
    """``line L, byte B`` of ``data[offset]``."""
    line, line_start = data.count(b"\n", 0, offset) + 1, data.rfind(b"\n", 0, offset) + 1
    return f"line {line}, byte {offset - line_start + 1}"


def root_cause(exc: BaseException) -> str:
    """The last two distinct messages of ``exc``'s chain, innermost first."""
    messages = []
    for seen in _chain(exc):
        text = " ".join(str(seen).split())
        if text and text not in messages:
            messages.append(text)
    return " <- ".join(reversed(messages[-2:])) if messages else type(exc).__name__


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    met: set[int] = set()
    while seen is not None and id(seen) not in met:
        met.add(id(seen))
        yield seen
        seen = seen.__cause__ or seen.__context__

"""Eval sets for ``dataidx decontaminate``: items read from local files (JSON lines, a JSON
array, Parquet; nothing is downloaded), one text field of each, refused in one line when the
file, its rows or the field are not what is asked."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

#: Fields tried, in order, when ``NAME=FILE`` names none.
FIELDS = ("question", "prompt", "problem", "input", "instruction", "text")
#: An eval file past this is not an eval set (5,000 items of a few KB is a few MB).
MAX_EVAL_BYTES = 1 << 30


@dataclass(frozen=True)
class EvalSet:
    """An eval set's name, file (and its sha256, recorded with the run), field and items."""

    name: str
    path: Path
    field: str
    sha256: str
    items: list[str]


def parse_eval(text: str) -> tuple[str, Path, str | None]:
    """``NAME=FILE[:FIELD]`` as ``(name, path, field)``, or a one-line UsageError."""
    name, equals, rest = text.partition("=")
    if not equals or not name or not rest:
        raise UsageError(f"--eval {text!r}: give NAME=FILE or NAME=FILE:FIELD")
    path, colon, field = rest.rpartition(":") if ":" in rest and not Path(rest).exists() else (rest, "", "")
    return name, Path(path), (field or None) if colon else None


def read_eval(name: str, path: Path, field: str | None) -> EvalSet:
    """The eval set in ``path``: each row's ``field`` (or the first of :data:`FIELDS` its rows hold)."""
    try:
        size = path.stat().st_size
        if size > MAX_EVAL_BYTES:
            raise UsageError(f"{path}: {size:,} bytes, past the {MAX_EVAL_BYTES:,} an eval set may have")
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read eval set '{name}': {exc.strerror or exc}") from None
    rows = _rows(path, data)
    if not rows:
        raise UsageError(f"{path}: eval set '{name}' has no items")
    if all(isinstance(row, str) for row in rows):
        items, chosen = list(rows), field or "(the rows)"
    else:
        chosen = field or next((key for key in FIELDS if isinstance(rows[0], dict) and key in rows[0]), "")
        if not chosen:
            keys = sorted(rows[0]) if isinstance(rows[0], dict) else []
            raise UsageError(f"{path}: eval set '{name}': give its field as {name}={path}:FIELD (its rows have "
                             f"{', '.join(keys[:10]) or 'no fields'})")
        items = []
        for number, row in enumerate(rows):
            value = row.get(chosen) if isinstance(row, dict) else None
            if not isinstance(value, str):
                raise UsageError(f"{path}: eval set '{name}', item {number}: no text field '{chosen}'")
            items.append(value)
    return EvalSet(name, path, chosen, hashlib.sha256(data).hexdigest(), items)


def _rows(path: Path, data: bytes) -> list[Any]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq  # a parquet eval set only

            return pq.read_table(path).to_pylist()
        text = data.decode("utf-8")
        if suffix == ".json":
            found = json.loads(text)
            if not isinstance(found, list):
                raise ValueError("not a JSON array of items")
            return found
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"{path}: not an eval set of JSON lines, a JSON array or Parquet ({str(exc)[:120]})") from None

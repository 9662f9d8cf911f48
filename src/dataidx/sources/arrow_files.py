"""What a store records of a dataset's Arrow files: where each record batch starts, and whether
the files are still the ones the build read.

Files are read a message at a time, never mapped: reading messages through a map touches most
of a file's pages, and each touched page counts in the process's memory while it is mapped.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .fingerprints import HASH, content_hash

if TYPE_CHECKING:
    from datasets import Dataset


def batch_layout(path: str) -> list[tuple[int, int]]:
    """``(byte offset, rows)`` of every non-empty record batch of an Arrow stream file.

    The file is read a message at a time, not mapped: reading messages through a map touches
    most of its pages, and each touched page counts in the process's memory while mapped.
    """
    layout = []
    with pa.OSFile(path) as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        schema = None
        while True:
            offset = source.tell()
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if message is None:
                break
            if message.type == "schema":
                schema = pa.ipc.read_schema(message)
            elif message.type == "record batch":
                rows = pa.ipc.read_record_batch(message, schema).num_rows
                if rows:
                    layout.append((offset, rows))
            else:
                raise ValueError(f"{path}: unexpected Arrow message '{message.type}'")
    return layout


def arrow_files_of(dataset: Dataset) -> list[dict[str, Any]] | None:
    """The Arrow files that hold exactly ``dataset``'s rows in order, with their batch layout,
    or None if there are none (then readers load the source again)."""
    if getattr(dataset, "_indices", None) is not None:
        return None
    paths = [entry["filename"] for entry in dataset.cache_files]
    files = arrow_files_at(paths) if paths else None
    return files if files is not None and sum(f["rows"] for f in files) == len(dataset) else None


def arrow_files_at(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Records of Arrow stream files read whole, in order: size, mtime, content hash and batch
    layout. Readers serve rows from these files, so ``dataidx verify`` checks their content, not
    only their size and mtime."""
    files = []
    for path in paths:
        stat = os.stat(path)
        layout = batch_layout(path)
        files.append({"path": path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, HASH: content_hash(path),
                      "rows": sum(r for _, r in layout), "batches": layout})
    return files


def arrow_files_state(files: Sequence[dict[str, Any]], *, deep: bool = False) -> str:
    """``"intact"``, ``"missing"`` (a cleaned cache: load the source again), ``"changed"`` (the
    cache was written anew since the build: its rows may no longer match the index) or, with
    ``deep``, ``"edited"`` (same size and mtime, other content)."""
    for entry in files:
        try:
            stat = os.stat(entry["path"])
        except OSError:
            return "missing"
        if stat.st_size != entry["size"] or stat.st_mtime_ns != entry.get("mtime_ns", stat.st_mtime_ns):
            return "changed"
    if deep:
        for entry in files:
            try:
                if HASH in entry and content_hash(entry["path"]) != entry[HASH]:
                    return "edited"
            except OSError:
                return "missing"
    return "intact"

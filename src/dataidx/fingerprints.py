"""Cheap fingerprints of source files (size and mtime) and the check that they still hold.

These are what opening a store verifies, so that a changed source is refused instead of
serving rows that no longer match the index.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any


def stat_files(paths: Iterable[str]) -> list[dict[str, Any]]:
    """``{path, size, mtime_ns}`` of each file, as the store records them."""
    found = []
    for path in paths:
        stat = os.stat(path)
        found.append({"path": path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    return found


def changed_files(recorded: Sequence[dict[str, Any]]) -> list[str]:
    """What changed among the recorded files, one phrase per file; empty if nothing did."""
    changes = []
    for entry in recorded:
        try:
            stat = os.stat(entry["path"])
        except OSError:
            changes.append(f"{entry['path']} is missing")
            continue
        if stat.st_size != entry["size"]:
            changes.append(f"{entry['path']} changed size ({entry['size']} -> {stat.st_size} bytes)")
        elif stat.st_mtime_ns != entry["mtime_ns"]:
            changes.append(f"{entry['path']} was modified after the build")
    return changes

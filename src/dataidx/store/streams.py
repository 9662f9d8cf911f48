"""A store's materialised streaming sources (``<store>.streams``): which of them a build may
remove once the new store is in place.

The folder may be a link to a bigger disk that other stores' streams share, and the datasets
cache names a stream's folder by its content, so two stores can materialise the same stream into
one folder. A build therefore removes only a stream folder the store it replaces recorded, that
the new store does not read, in a streams folder of its own (not a link)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path

from ..errors import StoreError
from .connect import open_any_revision
from .location import PostgresStore


def recorded_streams(store: str | os.PathLike[str] | PostgresStore) -> set[str]:
    """The Arrow files a store's datasets record (real paths), read before a build replaces it:
    the only streams :func:`prune_streams` may remove."""
    try:
        connection, _ = open_any_revision(store)
    except StoreError:
        return set()  # no store there
    try:
        rows = connection.execute("SELECT arrow_files FROM datasets").fetchall()
    finally:
        connection.close()
    recorded: set[str] = set()
    for (text,) in rows:
        try:
            files = json.loads(text) if isinstance(text, str) else text
        except ValueError:
            continue
        recorded.update(os.path.realpath(record["path"]) for record in files or []
                        if isinstance(record, dict) and isinstance(record.get("path"), str))
    return recorded


def prune_streams(folder: Path, used: Collection[str], recorded: Collection[str]) -> None:
    """Remove the stream folders (``<builder>/<config-and-fingerprint>``) in ``folder`` that hold
    an Arrow file of ``recorded`` (the old store's) and none of ``used`` (the new store's): a
    source changed since. Nothing in a linked streams folder, and no linked stream folder."""
    if folder.is_symlink() or not folder.is_dir():
        return
    used, recorded = {os.path.realpath(path) for path in used}, set(recorded)
    for cache in folder.glob("*/*"):
        if cache.is_symlink() or not cache.is_dir():
            continue
        held = {os.path.realpath(path) for path in cache.rglob("*.arrow")}
        if held & recorded and not held & used:
            shutil.rmtree(cache, ignore_errors=True)

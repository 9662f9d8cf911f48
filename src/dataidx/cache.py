"""Stores built on first use from a YAML path, for ``DataEngine("data/v1_sft_demo.yaml")``.

A LLaMA-Factory v1 user changes nothing but the import: the first run builds a store into a
cache folder, keyed by the config text, the datasets as resolved (absolute paths), the seed
and the sampling mode; later runs open it in milliseconds. Opening verifies the sources as any
open does; a changed source rebuilds the store, saying so. Processes starting together build
once: the first takes a lock file, the others wait for it and open what it built.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

from . import index  # the package, not its names: building loads SQLAlchemy, opening a cached store never does
from .config import load_config
from .errors import StoreError
from .paths import cache_dir
from .read import StoreReader
from .spec import DEFAULT_SEED, YAML_SUFFIXES
from .store import SCHEMA_REVISION, Datasets

logger = logging.getLogger("dataidx")


def is_config_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``DataEngine`` should treat ``path`` as a YAML config rather than a store."""
    return os.fspath(path).endswith(YAML_SUFFIXES)


def cached_store(config_path: str | os.PathLike[str], *, seed: int = DEFAULT_SEED, sampling: str = "exact",
                 folder: str | os.PathLike[str] | None = None) -> tuple[Path, bool]:
    """``(store, built)``: the cached store of a YAML config, built now if missing or stale.

    Example::

        store, built = cached_store("data/demo_sft.yaml")
    """
    config = load_config(config_path)
    key = hashlib.sha256(json.dumps(
        [config.text, [dataset.info() for dataset in config.datasets], seed, sampling, SCHEMA_REVISION]
    ).encode()).hexdigest()[:24]
    folder = Path(folder) if folder is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"{Path(config_path).stem}-{key}.db"
    if _problem(store) is None:
        return store, False
    with open(folder / f".{store.name}.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when closed, or when the holder dies
        problem = _problem(store)
        if problem is None:  # another process built it while we waited
            return store, False
        if store.exists():
            logger.warning("dataidx: rebuilding %s for %s: %s", store, config_path, problem)
        else:
            logger.warning("dataidx: building %s for %s (once; later runs open it)", store, config_path)
        # The cache's own file, named by its config: a rebuild replaces it whole, as it always has.
        index.build(config, store, seed=seed, sampling=sampling, replace=True)
    return store, True


def _problem(store: Path) -> str | None:
    """Why the cached store cannot be served as is, or None."""
    if not store.exists():
        return "not built yet"
    try:
        StoreReader(store).close()
    except StoreError as exc:  # stale sources included
        return str(exc)
    return None


#: The name :func:`cached_store` gives a store: the config's stem and 24 hex digits of its key.
_CACHED_NAME = re.compile(r".+-[0-9a-f]{24}\.db")
_SQLITE_HEADER = b"SQLite format 3\x00"


def _made_here(path: Path) -> bool:
    """Whether ``path`` is a store this cache made: its name, a plain file (not a link to
    somewhere else), a SQLite file. Anything else in the folder is someone else's."""
    if not _CACHED_NAME.fullmatch(path.name) or path.is_symlink() or not path.is_file():
        return False
    before = path.stat()
    try:  # without touching the access time that "last used" reads
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))
    except PermissionError:  # O_NOATIME needs the file's owner
        descriptor = os.open(path, os.O_RDONLY)
    try:
        header = os.read(descriptor, len(_SQLITE_HEADER))
    finally:
        os.close(descriptor)
    if path.stat().st_atime != before.st_atime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return header == _SQLITE_HEADER


def cached_stores(folder: str | os.PathLike[str] | None = None) -> list[tuple[Path, int, float]]:
    """``(store, bytes, last used)`` of every store the cache made in its folder, oldest use
    first; a store's streams folder counts towards its size. "Last used" is the file's access
    time. Files the cache did not make are never listed, so never cleaned."""
    folder = Path(folder) if folder is not None else cache_dir()
    found = []
    for store in filter(_made_here, folder.glob("*.db")):
        streams = Datasets.streams_folder(store)
        size = store.stat().st_size + sum(p.stat().st_size for p in streams.rglob("*") if p.is_file())
        found.append((store, size, max(store.stat().st_atime, store.stat().st_mtime)))
    return sorted(found, key=lambda item: item[2])


def clean_cache(older_than_days: float, folder: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove cached stores (and their streams) not used for ``older_than_days``; returns them.
    Each removal takes the store's lock, so a process building or opening it is never cut off."""
    folder = Path(folder) if folder is not None else cache_dir()
    removed = []
    for store, _, used in cached_stores(folder):
        if time.time() - used < older_than_days * 86400:
            continue
        with open(folder / f".{store.name}.lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            store.unlink(missing_ok=True)
            shutil.rmtree(Datasets.streams_folder(store), ignore_errors=True)
        (folder / f".{store.name}.lock").unlink(missing_ok=True)
        removed.append(store)
    return removed

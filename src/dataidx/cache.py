"""Stores built on first use from a YAML path, for ``DataEngine("data/v1_sft_demo.yaml")``, and
from whatever else LLaMA-Factory v1's ``DataEngine`` takes (:func:`engine_store`).

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
from .config import load_config, parse_datasets
from .errors import StoreError
from .paths import cache_dir
from .read import StoreReader
from .sources import BUILDERS
from .spec import DEFAULT_SEED, YAML_SUFFIXES, Config
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
    return _cached(load_config(config_path), Path(config_path).stem, seed=seed, sampling=sampling, folder=folder)


def _cached(config: Config, stem: str, *, seed: int, sampling: str,
            folder: str | os.PathLike[str] | None) -> tuple[Path, bool]:
    """:func:`cached_store` of a parsed config whose store is named ``stem-KEY.db``."""
    config_path = config.origin
    key = hashlib.sha256(json.dumps(
        [config.text, [dataset.info() for dataset in config.datasets], seed, sampling, SCHEMA_REVISION]
    ).encode()).hexdigest()[:24]
    folder = Path(folder) if folder is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"{stem}-{key}.db"
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


#: What ``DataEngine`` takes, said in full when a path is none of it.
TAKES = ("a store (a file, a sqlite:/// or postgresql:// URL), a LLaMA-Factory v1 YAML (a local file, or "
         "org/repo/file.yaml in a hub dataset repo), a local data file or folder "
         f"({', '.join('.' + suffix for suffix in BUILDERS)}) or a hub dataset id (org/name)")
#: A hub repo id, ``org/name``, as v1 passes it to the hub.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def engine_store(target: str | os.PathLike[str], *, seed: int = DEFAULT_SEED,
                 sampling: str = "exact") -> str | os.PathLike[str]:
    """The store ``DataEngine(target)`` opens: ``target`` itself when it is a store, else the cached
    store built from it once, so a v1 user passes ``DataEngine`` what v1's took, unchanged.

    As v1's ``_get_dataset_info``: a ``.yaml`` path is a local config, else ``org/repo/file.yaml``
    in a hub dataset repo; an existing data file or folder is one dataset named ``default`` (no
    converter, as v1 loads it; a folder holding no data file is said to be no store); ``org/name``
    that is no local path is a hub dataset. A hub file comes through ``huggingface_hub``'s cache,
    which fails at once when offline and the name is not cached, where ``datasets`` would retry
    for 25 s first.

    Example::

        engine_store("data/alpaca_en_demo.json")   # ~/.cache/dataidx/alpaca_en_demo-<key>.db
    """
    text = os.fspath(target)
    if "://" in text:
        return target
    if text.endswith(YAML_SUFFIXES):
        if os.path.isfile(text) or not _in_hub_repo(text):
            return cached_store(text, seed=seed, sampling=sampling)[0]
        repo, filename = text.rsplit("/", 1)
        return cached_store(_from_hub(text, repo, filename), seed=seed, sampling=sampling)[0]
    if os.path.isdir(text):
        if not any(_suffix(name) in BUILDERS for _, _, names in os.walk(text) for name in names):
            raise StoreError(f"{text}: is a folder, not a store file, and holds no data files; DataEngine "
                             f"takes {TAKES}")
        return cached_store(text, seed=seed, sampling=sampling)[0]
    if os.path.isfile(text) and _suffix(text) in BUILDERS:
        return cached_store(text, seed=seed, sampling=sampling)[0]
    if os.path.exists(text):
        return target  # a store, or a file the store reader says what is wrong with
    if _HUB_ID.fullmatch(text) and not os.path.isdir(text.split("/")[0]):
        mapping = {"default": {"path": _from_hub(text, text)}}  # hf_hub on the snapshot: the hub's own layout rules
        config = Config(origin=text, text=f"default:\n  path: {text}\n", datasets=parse_datasets(mapping, text))
        return _cached(config, text.split("/")[1], seed=seed, sampling=sampling, folder=None)[0]
    raise StoreError(f"{text}: store not found, and not anything else DataEngine takes: {TAKES}")


def _suffix(path: str) -> str:
    """A file's extension as v1's local loader maps it to a builder (``.JSONL`` is ``jsonl``)."""
    return os.path.splitext(path)[1].lstrip(".").lower()


def _in_hub_repo(path: str) -> bool:
    """Whether a YAML path that is no local file names one in a hub repo: ``org/repo/file.yaml``
    whose ``org`` is no local folder (else it is a local config mistyped, said as such)."""
    repo = path.rsplit("/", 1)[0] if "/" in path else ""
    return bool(_HUB_ID.fullmatch(repo)) and not os.path.isdir(repo.split("/")[0])


def _from_hub(name: str, repo: str, filename: str | None = None) -> str:
    """A hub dataset repo's snapshot folder (or one file of it) from the local Hugging Face cache,
    downloaded first when the hub can be reached; a failure is one line naming ``name``."""
    import huggingface_hub  # here, not at import: only a hub name needs it
    from huggingface_hub import constants, errors

    try:  # snapshot_download for one file too: hf_hub_download retries an unreachable hub for 23 s
        snapshot = huggingface_hub.snapshot_download(repo, repo_type="dataset",
                                                     allow_patterns=None if filename is None else [filename])
    except errors.LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the hub cannot be reached"
        raise StoreError(f"{name}: not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the "
                         f"machine is offline ({why}); fetch it once where the hub is reachable, or give a local "
                         "path") from None
    except (errors.HfHubHTTPError, errors.EntryNotFoundError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"{name}: cannot be fetched from the Hugging Face hub: {first}") from None
    if filename is not None and not os.path.isfile(os.path.join(snapshot, filename)):
        raise StoreError(f"{name}: no file {filename} in hub dataset repo {repo} as the local Hugging Face cache "
                         f"holds it ({snapshot}); offline, fetch it once where the hub is reachable")
    return snapshot if filename is None else os.path.join(snapshot, filename)


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

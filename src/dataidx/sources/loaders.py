"""Source plugins: load one dataset of a config into a ``datasets.Dataset``.

Loading is delegated to ``datasets.load_dataset`` as in LLaMA-Factory v1. Each loader also
returns the files the dataset was read from, so the store can notice later that they changed.
``datasets`` is imported inside the loaders: commands that only read a store never pay for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..errors import SourceError
from ..spec import DatasetSpec
from .failures import local_path_not_found, why_not_loaded
from .json_depth import MAX_NESTING, too_deep
from .json_surrogates import lone_surrogate
from .registry import Loaded, checked, sources

if TYPE_CHECKING:
    from datasets import Dataset

#: The sources whose ``path`` is a local file or folder, or a hub id, as :func:`source_files` reads it.
BUILTIN_SOURCES = ("local", "hf_hub")
#: File extension -> ``datasets`` builder, as v1's local loader maps them.
BUILDERS = {"json": "json", "jsonl": "json", "csv": "csv", "parquet": "parquet", "arrow": "arrow", "txt": "text"}


def load(spec: DatasetSpec) -> Loaded:
    """Load ``spec`` through its source plugin; any failure names the dataset and the path.

    ``datasets`` keys its cache of local files by path and mtime, so a file rewritten with its
    mtime put back (``cp -p``, ``rsync -a``) would be served from the old cache. The inode's
    change time cannot be put back: a source changed after its cache was written is loaded
    again, bypassing the cache.
    """
    loader = sources.get(spec.source)
    try:
        with _quiet_datasets():
            loaded = checked(loader.func(spec), spec)
            if _cache_older_than_sources(loaded):
                loaded = checked(loader.func(spec, refresh=True), spec)
            return loaded
    except SourceError:
        raise
    except Exception as exc:  # datasets raises many types; the user needs the cause, in the file's terms
        raise SourceError(why_not_loaded(spec, exc, source_files(spec))) from exc


def _cache_older_than_sources(loaded: Loaded) -> bool:
    caches = loaded.cache_paths()
    if not caches or not loaded.files:
        return False
    written = min(os.stat(path).st_mtime_ns for path in caches)
    return max(os.stat(path).st_ctime_ns for path in loaded.files) > written


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """Silence ``datasets``' own progress bars and logged errors for one load: dataidx reports
    progress itself, and a failure as one line (``datasets`` logs one before raising it)."""
    import datasets  # here, not at import: reading a store never loads a source this way

    was_enabled = datasets.are_progress_bars_disabled() is False
    verbosity = datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(max(verbosity, datasets.logging.CRITICAL))
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)
        if was_enabled:
            datasets.enable_progress_bars()


def builder_for(spec: DatasetSpec, filename: str) -> str:
    extension = os.path.splitext(filename)[1].lstrip(".").lower()
    if extension not in BUILDERS:
        known = ", ".join(f".{ext}" for ext in BUILDERS)
        raise SourceError(
            f"dataset '{spec.name}': unknown file extension of {filename!s} (known: {known})"
        )
    return BUILDERS[extension]


def data_files_in(folder: str) -> list[str]:
    """Visible files under ``folder``, subfolders included (``load_dataset(data_dir=...)`` reads
    them too), in a stable order."""
    files: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith("."))
    return files


def source_files(spec: DatasetSpec) -> list[str]:
    """The local files a dataset is read from, listed as its loader lists them (none for a hub id).

    Opening a store compares this listing with the recorded one, so a file added to a dataset
    folder is noticed as surely as a changed one. A user's source names its files itself (its
    path, as written, need not be a path here): none are listed for it.
    """
    if spec.source not in BUILTIN_SOURCES:
        return []
    if os.path.isfile(spec.path):
        return [spec.path]
    if not os.path.isdir(spec.path):
        return []
    return data_files_in(spec.path)


#: Where streaming sources are materialised; None means the ``datasets`` cache.
_STREAMS_INTO: ContextVar[str | None] = ContextVar("dataidx_streams_into", default=None)


@contextmanager
def materialising_streams_into(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Materialise streaming sources loaded in this block into ``folder`` (the build puts them
    next to its store)."""
    token = _STREAMS_INTO.set(os.fspath(folder))
    try:
        yield
    finally:
        _STREAMS_INTO.reset(token)


def load_split(spec: DatasetSpec, *args: Any, refresh: bool = False, json_files: Sequence[str] = (),
               **kwargs: Any) -> Loaded:
    """``load_dataset(*args, split=spec.split, **kwargs)``; a ``streaming: true`` source is
    consumed once and its rows written to a local Arrow cache, then read like any other.
    ``json_files`` are checked (:func:`refuse_unreadable_json`) when, and only when, pyarrow's
    JSON reader is about to parse them: not when the cache holds the prepared split.

    The steps are ``load_dataset``'s own (builder, ``download_and_prepare``, ``as_dataset``),
    but the dataset is opened only on demand when the split is whole cache files: see
    :class:`Loaded`. LLaMA-Factory v1 cannot index a stream (it serves placeholders);
    materialised, it gets the same index, fingerprints and memory-mapped reads as a file. The
    cache is keyed by the dataset's settings and its files' sizes and times, so a changed
    source is streamed again.
    """
    # here, not at import: a heavy library readers rarely need
    from datasets import Dataset, DownloadMode, load_dataset, load_dataset_builder

    if not spec.streaming:
        mode = DownloadMode.FORCE_REDOWNLOAD if refresh else DownloadMode.REUSE_DATASET_IF_EXISTS
        builder = load_dataset_builder(*args, download_mode=mode, **kwargs)
        if refresh or not _prepared(builder):
            refuse_unreadable_json(spec, json_files)
        builder.download_and_prepare(download_mode=mode)

        def open_split() -> Dataset:
            dataset = builder.as_dataset(split=spec.split)
            assert isinstance(dataset, Dataset)  # a DatasetDict comes only when no split is named
            return dataset

        return Loaded(arrow_paths=_whole_split_files(builder, spec.split), files=[], open_dataset=open_split)
    refuse_unreadable_json(spec, json_files)  # a stream is parsed on every build
    stream = load_dataset(*args, split=spec.split, streaming=True, **kwargs)
    stamps = [(path, os.stat(path).st_size, os.stat(path).st_mtime_ns, os.stat(path).st_ctime_ns)
              for path in source_files(spec)]
    key = hashlib.sha256(json.dumps([spec.info(), stamps, "stream-1"]).encode()).hexdigest()
    # The key covers the files' sizes and times, so a changed source is streamed anew without a
    # refresh (from_generator takes no download_mode).
    # datasets annotates cache_dir as str with a None default: None is its own cache, as meant here.
    return Loaded(Dataset.from_generator(_stream_rows, gen_kwargs={"stream": stream}, features=stream.features,
                                         cache_dir=_STREAMS_INTO.get(),  # pyright: ignore[reportArgumentType]
                                         fingerprint=key))


def _prepared(builder: Any) -> bool:
    """Whether ``download_and_prepare`` will find the split in the cache instead of parsing the
    files: its own test, the cache folder's dataset_info.json. The folder is keyed by the files'
    paths and mtimes, and :func:`load` refreshes a source changed after it, so a changed file is
    parsed again, and checked first."""
    from datasets import config  # here, not at import: a heavy library readers rarely need

    try:
        return os.path.exists(os.path.join(builder._cache_dir, config.DATASET_INFO_FILENAME))
    except (AttributeError, TypeError):  # another datasets: check the files
        return False


def _whole_split_files(builder: Any, split: str) -> list[str] | None:
    """The cache files ``builder.as_dataset(split)`` reads, found the way it finds them, when the
    split is one whole named split (no slice such as ``train[:10%]``, no ``+``), else None."""
    from datasets.arrow_reader import ArrowReader  # here, not at import: a heavy library readers rarely need

    if not re.fullmatch(r"[\w.-]+", split) or split not in (builder.info.splits or {}):
        return None
    try:
        cache_dir = builder._fs._strip_protocol(builder._output_dir)
        name = builder.name if builder._check_legacy_cache() else builder.dataset_name
        instructions = ArrowReader(cache_dir, builder.info).get_file_instructions(
            name, split, builder.info.splits.values())
    except (AttributeError, TypeError, ValueError, KeyError):  # another datasets: open the dataset instead
        return None
    if not instructions or any(f.get("skip", 0) for f in instructions):
        return None
    return [f["filename"] for f in instructions]


def _stream_rows(stream: Any) -> Iterator[dict[str, Any]]:
    yield from stream


@sources.register("local", version="1")
def load_local(spec: DatasetSpec, *, refresh: bool = False) -> Loaded:
    """A local file or a folder of files of one type (json, jsonl, csv, parquet, arrow, txt)."""
    kwargs: dict[str, Any]
    if os.path.isfile(spec.path):
        kwargs = {"data_files": spec.path}
    elif os.path.isdir(spec.path):
        if not data_files_in(spec.path):
            raise SourceError(f"dataset '{spec.name}': folder {spec.path} holds no data files")
        kwargs = {"data_dir": spec.path}
    else:
        raise SourceError(f"dataset '{spec.name}': file not found: {spec.path}")
    files = source_files(spec)
    builders = {builder_for(spec, name) for name in files}
    if len(builders) > 1:
        raise SourceError(
            f"dataset '{spec.name}': folder {spec.path} mixes file types ({', '.join(sorted(builders))})"
        )
    builder = builders.pop()
    loaded = load_split(spec, builder, refresh=refresh, json_files=files if builder == "json" else (), **kwargs)
    loaded.files = files
    return loaded


def refuse_unreadable_json(spec: DatasetSpec, files: Sequence[str]) -> None:
    """A SourceError naming the file and line where JSON nests past what any dataset needs, before
    pyarrow's reader (which crashes the process on it) sees the file, or escapes a lone surrogate,
    which one reader refuses and another drops in silence (:mod:`.json_surrogates`)."""
    for path in files:
        if path.endswith((".json", ".jsonl")):
            line = too_deep(path)
            if line is not None:
                raise SourceError(f"dataset '{spec.name}': {path}: line {line}: JSON nested deeper than "
                                  f"{MAX_NESTING} levels; no dataset needs that, and the JSON reader cannot take it")
            lone = lone_surrogate(path)
            if lone is not None:
                raise SourceError(f"dataset '{spec.name}': {path}: line {lone[0]}: {lone[1]} is half of a UTF-16 "
                                  "surrogate pair without its other half, not a character; write the character "
                                  "itself, or both halves of its pair")


@sources.register("hf_hub", version="1")
def load_hub(spec: DatasetSpec, *, refresh: bool = False) -> Loaded:
    """``datasets.load_dataset(path, split=...)``: a hub id, or a local folder laid out like one."""
    mistyped = local_path_not_found(spec, BUILDERS)
    if mistyped:
        raise SourceError(mistyped)
    loaded = load_split(spec, spec.path, refresh=refresh, json_files=source_files(spec))
    loaded.files = source_files(spec)
    return loaded

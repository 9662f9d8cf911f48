"""Is a store still true to its sources? Cheap checks on every open, deep ones on demand.

Opening compares each source file's size and mtime, the listing of dataset folders, and the
recorded converter and loader versions; a fetch checks the size and mtime of its row's media
files. ``dataidx verify`` adds content hashes of every source file and every recorded media file,
the recorded Arrow data, SQLite's own integrity check, the summary tables and every packing plan
recounted. A dataset whose files are at their recorded places relative to the store,
other files than the build read (a project folder moved or copied whole), is checked, and read,
there.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..convert import converters
from ..errors import PluginError, hide_passwords
from ..sources import added_files, arrow_files_state, changed_files, placed, source_files, sources
from ..spec import DatasetSpec
from ..store import Datasets, Media, Mixtures, Plans, open_store, recount_problems


def datasets_as_found(datasets: dict[int, Datasets.Stored],
                      store: str | os.PathLike[str]) -> tuple[str | None, dict[int, Datasets.Stored]]:
    """The store's folder (None in PostgreSQL) and its ``datasets`` by id
    (:meth:`~dataidx.store.Datasets.by_id`), each :func:`as_found` there."""
    folder = Datasets.folder_of(store)
    return folder, {id_: as_found(dataset, folder) for id_, dataset in datasets.items()}


def as_found(dataset: Datasets.Stored, folder: str | None) -> Datasets.Stored:
    """``dataset`` with its paths where its files are now, for a store in ``folder``.

    A store's sources are those at their places relative to it, when its first file is there: a
    project folder moved whole finds them, and a copy (``cp -a``) checks its own, not the ones it
    was copied from. Then the whole dataset is read there: its files, the path it was loaded
    from (found by the same move) and, separately, its Arrow data (a stream beside the store
    moves with it; the datasets cache does not). Otherwise the recorded paths stand, and a missing
    file is said as ever. An unmoved store costs a string comparison a dataset.
    """
    files = _moved(dataset.files, folder)
    arrow_files = None if dataset.arrow_files is None else _moved(dataset.arrow_files, folder)
    if files is dataset.files and arrow_files is dataset.arrow_files:
        return dataset
    path = _moved_path(dataset.path, dataset.files[0]["path"], files[0]["path"]) if files else dataset.path
    info = {**dataset.info, "path": path} if "path" in dataset.info else dataset.info
    return dataclasses.replace(dataset, path=path, info=info, files=files, arrow_files=arrow_files)


def _moved(recorded: list[dict[str, Any]], folder: str | None) -> list[dict[str, Any]]:
    """Every entry at its place relative to the store when the first one's is another file that
    exists; else ``recorded`` itself."""
    first = placed(recorded[0], folder) if recorded else None
    if first is None or first == recorded[0]["path"]:
        return recorded
    try:
        if not os.path.exists(first) or os.path.exists(recorded[0]["path"]) and os.path.samefile(
                first, recorded[0]["path"]):
            return recorded
    except OSError:  # gone between the two looks: the check says so
        return recorded
    return [{**entry, "path": placed(entry, folder) or entry["path"]} for entry in recorded]


def _moved_path(path: str, before: str, after: str) -> str:
    """Where a dataset's ``path`` is now that its file ``before`` is at ``after``: the file
    itself, or the folder it is listed under, found by what their ends share."""
    if before == path:
        return after
    below = before[len(path.rstrip(os.sep)):]
    if before.startswith(path) and below.startswith(os.sep) and after.endswith(below):
        return after[: len(after) - len(below)]
    return path


def dataset_problems(dataset: Datasets.Stored, *, deep: bool = False, folder: str | None = None) -> list[str]:
    """What changed for one stored dataset (:func:`as_found`) of a store in ``folder`` since the
    build; empty when it is unchanged."""
    problems = changed_files(dataset.files, deep=deep, folder=folder)
    problems += added_files(dataset.files, source_files(DatasetSpec(name=dataset.name, **dataset.info)))
    for family, registry, name, version in (
        ("converter", converters, dataset.converter, dataset.converter_version),
        ("loader", sources, dataset.source, dataset.loader_version),
    ):
        try:
            current = registry.get(name).version
        except PluginError:
            problems.append(f"{family} '{name}' is not registered in this process "
                            "(import the module that registers it)")
            continue
        if current != version:
            problems.append(f"{family} '{name}' is version {current}, the store was built with version {version}")
    state = arrow_files_state(dataset.arrow_files, deep=deep) if dataset.arrow_files else "intact"
    if state == "missing" and deep:
        problems.append("the Arrow data recorded at build time is gone (reads will load the source again)")
    elif state == "changed":
        problems.append("the Arrow data recorded at build time was written anew")
    elif state == "edited":
        problems.append("the Arrow data readers serve has other content than the build read (same size and mtime)")
    return problems


def verify_store(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Deep check of a whole store: ``{"ok": bool, "datasets": {name: [problems]}, "store": [...]}``."""

    with open_store(path) as handle:
        folder, datasets = datasets_as_found(Datasets(handle).by_id(), path)
        damage = [f"SQLite integrity check: {line}" for line in handle.integrity()]
        damage += recount_problems(handle)
        damage += Plans(handle).problems()
        damage += Mixtures(handle).held_out_problems()
        media = media_problems(Media(handle).files(), folder)
    report = {d.name: dataset_problems(d, deep=True, folder=folder) for d in datasets.values()}
    ok = not damage and not media and not any(problems for problems in report.values())
    return {"store": hide_passwords(os.fspath(path)), "ok": ok, "datasets": report, "integrity": damage,
            "media": media}


def _where_now(entry: dict[str, Any], folder: str | None) -> dict[str, Any]:
    """A recorded media file's entry with its path where a fetch reads it: its place relative to
    the store when a file is there."""
    moved = placed(entry, folder)
    return {**entry, "path": moved} if moved is not None and os.path.exists(moved) else entry


#: Media files named one by one in ``verify``'s answer; the rest are counted.
MEDIA_NAMED = 20


def media_problems(files: list[dict[str, Any]], folder: str | None = None) -> list[str]:
    """Each recorded media file that is gone or changed (size, mtime, or content rehashed), one
    phrase a file, the first :data:`MEDIA_NAMED` named and the rest counted; each looked for at
    its place relative to the store in ``folder`` first, as a fetch looks for it."""
    problems = [problem for entry in files
                for problem in changed_files([_where_now(entry, folder)], deep=True, folder=folder)]
    more = len(problems) - MEDIA_NAMED
    return [f"media file {problem}" for problem in problems[:MEDIA_NAMED]] + (
        [f"{more} more media files changed or are gone"] if more > 0 else [])

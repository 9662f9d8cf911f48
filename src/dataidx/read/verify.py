"""Is a store still true to its sources? Cheap checks on every open, deep ones on demand.

Opening compares each source file's size and mtime, the listing of dataset folders, and the
recorded converter and loader versions. ``dataidx verify`` adds content hashes of every
source file, the recorded Arrow data, SQLite's own integrity check, the summary tables and every
packing plan recounted.
"""

from __future__ import annotations

import os
from typing import Any

from ..convert import converters
from ..errors import PluginError, hide_passwords
from ..sources import added_files, arrow_files_state, changed_files, source_files, sources
from ..spec import DatasetSpec
from ..store import StoredDataset, composition_problems, open_store, plan_problems, read_datasets, summary_problems


def dataset_problems(dataset: StoredDataset, *, deep: bool = False) -> list[str]:
    """What changed for one stored dataset since the build; empty when it is unchanged."""
    problems = changed_files(dataset.files, deep=deep)
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
        datasets = read_datasets(handle)
        damage = [f"SQLite integrity check: {line}" for line in handle.integrity()]
        damage += composition_problems(handle)
        damage += summary_problems(handle)
        damage += plan_problems(handle)
    report = {d.name: dataset_problems(d, deep=True) for d in datasets.values()}
    ok = not damage and not any(problems for problems in report.values())
    return {"store": hide_passwords(os.fspath(path)), "ok": ok, "datasets": report, "integrity": damage}

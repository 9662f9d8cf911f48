"""Read a LLaMA-Factory v1 dataset YAML, unchanged, into validated dataset specs.

Validation collects every problem of the file and reports them together, each naming the
dataset and the key, so a user fixes a config in one pass rather than one error per run.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ..convert import converters
from ..errors import ConfigError, shown
from ..sources import sources
from ..spec import BUDGET_KEYS, ERROR_POLICIES, VALID_KEYS, YAML_SUFFIXES, Config, DatasetSpec
from .yaml_text import YamlProblem, parse_yaml


def load_config(target: str | os.PathLike[str], *, plugins: bool = True) -> Config:
    """Load a YAML config, or treat a bare data file/folder as one dataset named ``default``.

    As in LLaMA-Factory v1: an existing non-YAML path is a local dataset, anything else that is
    not a YAML file is a hub dataset id. Relative paths resolve against the current directory.

    Example::

        config = load_config("data/demo_sft.yaml")
        [d.name for d in config.datasets]
    """
    import yaml  # here, not at import: most commands never read a YAML

    target = str(target)
    if target.endswith(YAML_SUFFIXES):
        path = Path(target)
        if not path.is_file():
            raise ConfigError(target, ["config file not found"])
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(target, [f"not UTF-8 text (byte {exc.start})"]) from None
        except OSError as exc:
            raise ConfigError(target, [f"cannot read: {exc.strerror or exc}"]) from None
        try:
            mapping = parse_yaml(text)
        except YamlProblem as exc:
            raise ConfigError(target, [str(exc)]) from None
        except yaml.YAMLError as exc:
            raise ConfigError(target, [f"not valid YAML: {' '.join(str(exc).split())}"]) from None
        return Config(origin=str(path.resolve()), text=text, datasets=parse_datasets(mapping, target, plugins=plugins))
    if os.path.exists(target):
        mapping = {"default": {"path": target, "source": "local"}}
    else:
        mapping = {"default": {"path": target}}
    text = yaml.safe_dump(mapping, sort_keys=False)
    return Config(origin=target, text=text, datasets=parse_datasets(mapping, target))


def parse_datasets(mapping: Any, origin: str, *, plugins: bool = True) -> list[DatasetSpec]:
    """Validate a ``name -> DatasetInfo`` mapping; raise one ConfigError listing every problem.

    ``plugins=False`` skips checking converter and source names, for callers that never run them
    (``dataidx mix`` reads only names, sizes and weights).
    """
    if not isinstance(mapping, dict) or not mapping:
        raise ConfigError(origin, ["expected a mapping of dataset name -> {path, source, ...}"])
    problems: list[str] = []
    specs: list[DatasetSpec] = []
    named = Counter(str(name) for name in mapping)  # 1 and '1' are two keys, one name; counted once each
    problems += [f"dataset '{name}': the name appears more than once" for name in sorted(named) if named[name] > 1]
    for name, info in mapping.items():
        found = _check_dataset(str(name), info, plugins)
        if found:
            problems.extend(found)
        else:
            specs.append(_to_spec(str(name), info))
    if problems:
        raise ConfigError(origin, problems)
    return specs


def _check_dataset(name: str, info: Any, plugins: bool = True) -> list[str]:
    where = f"dataset '{name}'"
    if not isinstance(info, dict):
        return [f"{where}: expected a mapping of keys ({', '.join(VALID_KEYS)}), got {type(info).__name__}"]
    problems = [
        f"{where}: unknown key '{key}' (valid: {', '.join(VALID_KEYS)})" for key in info if key not in VALID_KEYS
    ]
    if "path" not in info:
        problems.append(f"{where}: missing required key 'path'")
    elif not isinstance(info["path"], str) or not info["path"]:
        problems.append(f"{where}: key 'path' must be a non-empty string")
    for key in ("split", "source", "converter"):
        if key in info and info[key] is not None and not isinstance(info[key], str):
            problems.append(f"{where}: key '{key}' must be a string, got {shown(info[key])}")
    source = info.get("source", "hf_hub")
    if plugins and isinstance(source, str) and source not in sources:
        problems.append(f"{where}: key 'source': unknown source '{source}' (known: {', '.join(sources.names())}); "
                        "register a loader with @dataidx.register_source in a module passed to dataidx --plugins, "
                        "or installed under the entry point group dataidx.plugins")
    converter = info.get("converter")
    if plugins and isinstance(converter, str) and converter not in converters:
        problems.append(
            f"{where}: key 'converter': unknown converter '{converter}' (known: {', '.join(converters.names())})"
        )
    size = info.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        problems.append(f"{where}: key 'size' must be an integer >= 0, got {shown(size)}")
    weight = info.get("weight")
    if weight is not None and (
        isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0
    ):
        problems.append(f"{where}: key 'weight' must be a finite number >= 0, got {shown(weight)}")
    problems += _check_budget(where, info)
    for key in ("streaming", "allow_empty"):
        if info.get(key) is not None and not isinstance(info[key], bool):
            problems.append(f"{where}: key '{key}' must be true or false, got {shown(info[key])}")
    on_error = info.get("on_error", "raise")
    if on_error not in ERROR_POLICIES:
        problems.append(f"{where}: key 'on_error' must be one of {', '.join(ERROR_POLICIES)}, got {shown(on_error)}")
    problems += _check_columns(where, info.get("columns"))
    media_dir = info.get("media_dir")
    if media_dir is not None and not (isinstance(media_dir, str) and media_dir):
        problems.append(f"{where}: key 'media_dir' must be the folder the dataset's media paths start from, "
                        f"got {shown(media_dir)}")
    ignored = info.get("ignore_columns")
    if ignored is not None and (not isinstance(ignored, list) or not all(isinstance(c, str) and c for c in ignored)):
        problems.append(f"{where}: key 'ignore_columns' must be a list of column names the converter is meant to "
                        f"ignore (e.g. [label]), got {shown(ignored)}")
    return problems


def _check_budget(where: str, info: dict[str, Any]) -> list[str]:
    given = [key for key in BUDGET_KEYS if info.get(key) is not None]
    problems = [f"{where}: key '{key}' must be an integer > 0 (tokens under the render spec given to dataidx mix "
                f"--spec), got {shown(info[key])}" for key in given
                if isinstance(info[key], bool) or not isinstance(info[key], int) or info[key] <= 0]
    if len(given) > 1:
        problems.append(f"{where}: keys 'tokens' and 'supervised_tokens' are two budgets for one draw; give one")
    entries = [key for key in ("size", "weight") if info.get(key) is not None]
    if given and entries:
        problems.append(f"{where}: key '{given[0]}' is a token budget and '{entries[0]}' counts entries; give one "
                        "or the other")
    return problems


def _check_columns(where: str, columns: Any) -> list[str]:
    if columns is None:
        return []
    if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and v
                                                for k, v in columns.items()):
        return [f"{where}: key 'columns' must map the converter's column names to source column names "
                f"(e.g. {{instruction: question, output: answer}}), got {shown(columns)}"]
    sources_used = list(columns.values())
    return [f"{where}: key 'columns': source column '{name}' is given more than once"
            for name in sorted(set(sources_used)) if sources_used.count(name) > 1]


def _to_spec(name: str, info: dict[str, Any]) -> DatasetSpec:
    source = info.get("source") or "hf_hub"
    path = info["path"]
    # v1 resolves relative paths against the working directory. A hub id, and any path given to
    # a user's source (a ModelScope id, a bucket key), reaches its loader as written: only a
    # local file, or a local folder read by hf_hub, is a path on this machine.
    if source == "local" or (source == "hf_hub" and os.path.exists(path)):
        path = os.path.abspath(path)
    weight = info.get("weight")
    return DatasetSpec(
        name=name,
        path=path,
        source=source,
        split=info.get("split") or "train",
        converter=info.get("converter"),
        size=info.get("size"),
        weight=float(weight) if weight is not None else None,
        streaming=bool(info.get("streaming", False)),
        on_error=info.get("on_error", "raise"),
        columns=dict(info["columns"]) if info.get("columns") else None,
        tokens=info.get("tokens"),
        supervised_tokens=info.get("supervised_tokens"),
        allow_empty=bool(info.get("allow_empty", False)),
        ignore_columns=tuple(info["ignore_columns"]) if info.get("ignore_columns") is not None else None,
        media_dir=os.path.abspath(info["media_dir"]) if info.get("media_dir") else None,
    )

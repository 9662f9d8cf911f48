"""Import a LLaMA-Factory v0 ``dataset_info.json`` as a v1 YAML that dataidx builds.

v0 describes each dataset by file or hub id, a ``formatting`` (alpaca or sharegpt), a
``columns`` map from its own column roles to the file's names, and ShareGPT ``tags``. Each
becomes a v1 entry with a converter and, where the file's names differ from the converter's, a
``columns`` map. KTO data (``kto_tag``) in the OpenAI-tagged ShareGPT shape of LLaMA-Factory's
``kto_en_demo`` takes dataidx's ``kto`` converter (v1 has none). What v1 cannot express (ranking
data in v0's shape, KTO data in another, alpaca ``history``, custom ShareGPT tags, hub subsets,
loading scripts) is left out, each with its reason, both on stderr and as a comment at the top
of the YAML: never silently.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

# v0 column role -> the alpaca converter's column name.
_ALPACA = {"prompt": "instruction", "query": "input", "response": "output", "system": "system", "images": "images",
           "videos": "videos", "audios": "audios"}
# No "system": v1's sharegpt converter takes the system prompt from a system turn, not a column.
_SHAREGPT = {"messages": "conversations", "tools": "tools", "images": "images", "videos": "videos", "audios": "audios"}
_OPENAI = {"messages": "messages", "tools": "tools", "images": "images", "videos": "videos", "audios": "audios"}
_SHAREGPT_TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                  "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}
_OPENAI_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                "observation_tag": "tool", "system_tag": "system"}  # LLaMA-Factory's mllm_demo style


@dataclass
class Imported:
    """The v1 mapping made from a v0 file, and the datasets left out with their reasons."""

    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def yaml_text(self, origin: str) -> str:
        import yaml  # here, not at import: only this command writes YAML

        lines = [f"# Imported from LLaMA-Factory v0 {_one_line(origin)} by `dataidx import-v0`."]
        if self.left_out:
            lines.append("# Left out (v1 cannot express them):")
            lines += [f"#   {_one_line(name)}: {_one_line(reason)}" for name, reason in self.left_out.items()]
        body = yaml.safe_dump(self.datasets, sort_keys=False, allow_unicode=True) if self.datasets else "{}\n"
        return "\n".join(lines) + "\n" + body


def _one_line(text: str) -> str:
    """``text`` as it may stand in a YAML comment: escaped to ASCII, so no line break (``\\n``,
    ``\\x85``, ``\\u2028``...) can end the comment and start YAML of its own."""
    return json.dumps(str(text))[1:-1]


def import_dataset_info(path: str | os.PathLike[str], dataset_dir: str | os.PathLike[str] | None = None) -> Imported:
    """Convert ``dataset_info.json``; file names resolve against ``dataset_dir`` (default: its folder).

    Example::

        imported = import_dataset_info("LLaMA-Factory/data/dataset_info.json")
        Path("datasets.yaml").write_text(imported.yaml_text("dataset_info.json"))
    """
    source = Path(path)
    try:
        mapping = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(str(source), [f"cannot read a dataset_info.json: {exc}"]) from None
    if not isinstance(mapping, dict):
        raise ConfigError(str(source), ["expected a mapping of dataset name -> attributes"])
    folder = Path(dataset_dir) if dataset_dir is not None else source.parent
    imported = Imported()
    for name, info in mapping.items():
        try:
            imported.datasets[name] = _entry(info, folder)
        except _Unsupported as why:
            imported.left_out[name] = str(why)
    return imported


class _Unsupported(Exception):
    """A v0 dataset v1 cannot express; the message says why."""


def _entry(info: Any, folder: Path) -> dict[str, Any]:
    if not isinstance(info, dict):
        raise _Unsupported(f"expected a mapping of attributes, got {type(info).__name__}")
    for key, reason in (("script_url", "loads through a script"), ("subset", "names a hub subset"),
                        ("folder", "names a folder inside a hub repo")):
        if info.get(key):
            raise _Unsupported(f"{reason} ('{key}')")
    if info.get("ranking"):
        raise _Unsupported("ranking data in v0's shape (chosen/rejected single answers); v1's pair converter "
                           "needs chosen/rejected message lists")
    columns = dict(info.get("columns") or {})
    kto = "kto_tag" in columns
    entry: dict[str, Any] = _location(info, folder)
    formatting = info.get("formatting", "alpaca")
    if kto and not (formatting == "sharegpt" and _openai_tags(info)):
        raise _Unsupported("KTO data (kto_tag) in a shape converter kto does not take: it reads OpenAI-shaped "
                           "messages ({role, content}, as kto_en_demo's tags say)")
    if formatting == "alpaca":
        if columns.get("history"):
            raise _Unsupported("alpaca 'history' turns (v1's alpaca converter has none)")
        entry["converter"] = "alpaca"
        roles = _ALPACA
    elif formatting == "sharegpt":
        given = dict(info.get("tags") or {})
        tags = {**_SHAREGPT_TAGS, **given}
        if _openai_tags(info):
            entry["converter"], roles = ("kto", {**_OPENAI, "kto_tag": "label"}) if kto else ("openai", _OPENAI)
        elif tags == _SHAREGPT_TAGS:
            entry["converter"], roles = "sharegpt", _SHAREGPT
        else:
            changed = sorted(key for key, value in _SHAREGPT_TAGS.items() if tags[key] != value)
            raise _Unsupported(f"custom ShareGPT tags ({', '.join(changed)})")
    else:
        raise _Unsupported(f"formatting '{formatting}'")
    unknown = sorted(set(columns) - set(roles))
    if unknown:
        raise _Unsupported(f"column role(s) {', '.join(unknown)} not supported with formatting '{formatting}'")
    renames = {roles[role]: column for role, column in columns.items() if roles[role] != column}
    if renames:
        entry["columns"] = renames
    if info.get("split") and info["split"] != "train":
        entry["split"] = info["split"]
    if info.get("num_samples") is not None:
        samples = info["num_samples"]
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise _Unsupported(f"num_samples must be an integer >= 0, got {json.dumps(samples)[:60]}")
        entry["size"] = samples
    return entry


def _openai_tags(info: dict[str, Any]) -> bool:
    """Whether a ShareGPT entry's tags are the OpenAI ones (``role``/``content``, LLaMA-Factory's
    ``mllm_demo`` and ``kto_en_demo``)."""
    given = dict(info.get("tags") or {})
    return given.get("role_tag") == "role" and all(
        {**_OPENAI_TAGS, **given}.get(key) == value for key, value in _OPENAI_TAGS.items())


def _location(info: dict[str, Any], folder: Path) -> dict[str, Any]:
    if info.get("file_name"):
        return {"path": str((folder / info["file_name"]).resolve()), "source": "local"}
    if info.get("hf_hub_url"):
        return {"path": info["hf_hub_url"], "source": "hf_hub"}
    if info.get("ms_hub_url"):
        raise _Unsupported("ModelScope only (ms_hub_url): dataidx has no ms_hub source")
    raise _Unsupported("no file_name, hf_hub_url or ms_hub_url")

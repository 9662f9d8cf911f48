"""LLaMA-Factory v1's own Renderer (ff6d4d12), run from its source, over the conformance entries."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from . import digest
from .conversations import conversations

#: The demo datasets whose v1 samples and index the goldens cover (tests/helpers.py's names);
#: alpaca's 999 single turns are left to tests/test_render_golden.py, for the suite's time.
SHARED_NAMES = ["identity", "inject_demo", "glaive_toolcall_en_demo", "v1_sft_demo", "pair_demo", "v1_dpo_demo"]
HANDMADE = "handmade"


def v1_cuts(sample: dict[str, Any]) -> list[int | None]:
    """v1's multi-turn split (core/data_engine.py, ``DataEngine._prefix_cuts``): one prefix per
    assistant turn whose loss weight is above 1e-6; the whole sample when there is none."""
    messages = sample.get("messages")
    if not messages:
        return [None]
    cuts = [i + 1 for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("loss_weight", 1.0) > 1e-6]
    return cuts or [None]


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def entries(shared: Path | None) -> list[tuple[str, int, int | None, dict[str, Any]]]:
    """``(dataset, row, cut, sample)`` of every entry, each sample cut as v1's ``DataEngine._get`` cuts it."""
    found = [(HANDMADE, row, cut, sample) for row, sample in enumerate(conversations()) for cut in v1_cuts(sample)]
    if shared is not None:
        for name in SHARED_NAMES:
            samples = read_jsonl(shared / f"{name}.samples.jsonl")
            found += [(name, row, cut, samples[row]) for row, cut in read_jsonl(shared / f"{name}.index.jsonl")]
    return [(name, row, cut, {**sample, "messages": sample["messages"][:cut]} if cut is not None else sample)
            for name, row, cut, sample in found]


def outcome(made: dict[str, Any] | BaseException, refusals: list[str]) -> str | int:
    """An entry's golden: the digest of what v1 made, or the number of the error it refused it with."""
    if isinstance(made, BaseException):
        return refusal_number(f"{type(made).__name__}: {str(made)[:300]}", refusals)
    return digest(made["input_ids"], made["labels"], made["loss_weights"])


def refusal_number(refusal: str, refusals: list[str]) -> int:
    if refusal not in refusals:
        refusals.append(refusal)
    return refusals.index(refusal)


def _v1_package(source: Path) -> None:
    """``llamafactory`` importable from ``source`` without its ``__init__`` (v0's stack), once."""
    if "llamafactory" in sys.modules:
        return
    sys.path.insert(0, str(source))
    package = types.ModuleType("llamafactory")
    package.__path__ = [str(source / "llamafactory")]
    sys.modules["llamafactory"] = package


def v1_renderer_class(source: Path) -> Any:
    """v1's ``Renderer``, imported from its source."""
    _v1_package(source)
    from llamafactory.v1.core.rendering.rendering import Renderer  # type: ignore[import-not-found]

    return Renderer


def v1_converter(source: Path, name: str) -> Any:
    """v1's converter plugin ``name`` (plugins/data_plugins/converter.py), imported from its source."""
    _v1_package(source)
    from llamafactory.v1.plugins.data_plugins.converter import (  # type: ignore[import-not-found]
        DataConverterPlugin,
    )

    return DataConverterPlugin(name)


#: The date the goldens were rendered at, for the templates that write it (Llama 3.2's "Today Date",
#: gpt-oss's "Current date"): dataidx renders with ``--clock`` at it and v1 under :func:`frozen_clock`.
CLOCK = "2026-12-02"


@contextmanager
def frozen_clock(clock: str = CLOCK) -> Iterator[None]:
    """Hugging Face's ``strftime_now`` (what v1's templates read) at ``clock`` instead of now."""
    from transformers.utils import chat_template_utils

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls.fromisoformat(clock)

    saved, chat_template_utils.datetime = chat_template_utils.datetime, Frozen  # type: ignore[misc]
    try:
        yield
    finally:
        chat_template_utils.datetime = saved  # type: ignore[misc]


def v1_render(renderer: Any, sample: dict[str, Any]) -> dict[str, Any] | BaseException:
    """v1's render of ``sample`` at the goldens' date (:data:`CLOCK`), or the error it refused it with."""
    try:
        with frozen_clock():
            return renderer.process_samples([sample])[0]
    except Exception as exc:  # v1's refusal of this entry is the golden
        return exc

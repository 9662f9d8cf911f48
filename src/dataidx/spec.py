"""What a dataset config says, as plain data: datasets, their keys and defaults, mixture defaults.

Every stage reads these; only :mod:`dataidx.config` makes them (from YAML, with every check), so
this module imports nothing of dataidx's and nothing heavy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

#: Keys of a v1 ``DatasetInfo`` plus dataidx's ``on_error``, ``columns``, token budgets,
#: ``allow_empty``, ``ignore_columns`` and ``media_dir`` (v0's); anything else is a typo.
VALID_KEYS = ("path", "source", "split", "converter", "size", "weight", "streaming", "on_error", "columns",
              "tokens", "supervised_tokens", "allow_empty", "ignore_columns", "media_dir")
#: dataidx's budget keys: draw a dataset's entries until their tokens (or supervised tokens)
#: under a render spec reach the budget, instead of counting entries with ``size``/``weight``.
BUDGET_KEYS = ("tokens", "supervised_tokens")
#: Keys recorded in a store only when given, so stores of configs without them read as they always did.
RECORDED_WHEN_GIVEN = (*BUDGET_KEYS, "allow_empty", "ignore_columns", "media_dir")
#: A dataset at least this share of whose rows train nothing is a mistake (a wrong or missing
#: converter), unless it says ``allow_empty: true``.
EMPTY_SHARE = 0.99
#: ``on_error``: stop the build at a row its converter fails on, or record it as a reject.
ERROR_POLICIES = ("raise", "skip")
YAML_SUFFIXES = (".yaml", ".yml")
#: ``exact``: distinct entries when shrinking, whole repeats when growing; ``replacement``: v1's draw.
SAMPLING_MODES = ("exact", "replacement")
#: The mixture seed when none is given, so two builds of one config agree.
DEFAULT_SEED = 42


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """One dataset of a config, with v1's defaults filled in and a local ``path`` made absolute
    (a path given to any other source stays as the YAML wrote it)."""

    name: str
    path: str
    source: str = "hf_hub"
    split: str = "train"
    converter: str | None = None
    size: int | None = None
    weight: float | None = None
    streaming: bool = False
    on_error: str = "raise"
    #: converter's column name -> the source column holding it (LLaMA-Factory v0's ``columns``)
    columns: dict[str, str] | None = None
    #: a token budget (``tokens``) or a supervised-token budget (``supervised_tokens``), at most one
    tokens: int | None = None
    supervised_tokens: int | None = None
    #: build even if (almost) no row has a supervised turn or a preference pair: pretraining text
    allow_empty: bool = False
    #: columns that carry meaning (a preference pair, a KTO label) the converter does not read,
    #: ignored on purpose; without it such a column stops the build
    ignore_columns: tuple[str, ...] | None = None
    #: the folder relative media paths start from (LLaMA-Factory v0's ``media_dir``), made
    #: absolute; None: the working directory, then the data file's folder
    media_dir: str | None = None

    @property
    def budget(self) -> tuple[str, int] | None:
        """``(key, tokens)`` of the dataset's token budget, or None when it is drawn by entries."""
        for key in BUDGET_KEYS:
            if getattr(self, key) is not None:
                return key, getattr(self, key)
        return None

    def info(self) -> dict[str, Any]:
        """The spec as the JSON-able mapping the store records (dataidx's newer keys only when given,
        so stores of configs without them read as they always did)."""
        return {key: getattr(self, key) for key in VALID_KEYS
                if key not in RECORDED_WHEN_GIVEN or getattr(self, key) not in (None, False)}


@dataclass(frozen=True)
class Config:
    """A parsed config: where it came from, its exact text (for provenance) and its datasets."""

    origin: str
    text: str
    datasets: list[DatasetSpec] = field(default_factory=list)

    @property
    def budgeted(self) -> list[DatasetSpec]:
        """The datasets drawn by a token budget, which need a render spec's lengths."""
        return [dataset for dataset in self.datasets if dataset.budget is not None]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

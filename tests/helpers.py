"""What tests share besides fixtures: where things are, real files written from rows, tiny tokenizers.

Tests import these (``from .helpers import write_jsonl``); fixtures live in ``conftest.py``.
Scripts import them too (``from tests.helpers import train_tokenizer``). dataidx is imported inside
the functions that need it, so importing this module is cheap, and works against an older dataidx
(tests/chunked_golden.py runs under 0.2.0).
"""

from __future__ import annotations

import difflib
import json
import os
import random
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
GOLDEN = SHARED_DATA / "golden"

#: The Hypothesis profile tests/conftest.py loads: DATAIDX_HYPOTHESIS_PROFILE, else ``ci`` where CI
#: is set (.ci/run runs with CI=true) and ``dev`` elsewhere. ``ci`` draws the same examples on every
#: run, as many as each test asks for; ``dev`` draws new ones each run, a fifth as many, and first
#: replays any that failed before (.hypothesis/).
HYPOTHESIS_PROFILE = os.environ.get("DATAIDX_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def examples(n: int) -> int:
    """How many examples a property test that asks for ``n`` runs under :data:`HYPOTHESIS_PROFILE`."""
    return n if HYPOTHESIS_PROFILE == "ci" else max(10, n // 5)


requires_shared = pytest.mark.skipif(not GOLDEN.is_dir(), reason="../shared/data/golden is not beside the repo")

# Golden name -> (source file under ../shared/data, converter); None means rows are already standard.
GOLDEN_SOURCES = {
    "alpaca_en_demo": ("alpaca_en_demo.json", "alpaca"),
    "identity": ("identity.json", "alpaca"),
    "inject_demo": ("inject_demo.jsonl", "alpaca"),
    "glaive_toolcall_en_demo": ("glaive_toolcall_en_demo.json", "sharegpt"),
    "pair_demo": ("pair_demo.jsonl", "pair"),
    "v1_sft_demo": ("v1_sft_demo.jsonl", None),
    "v1_dpo_demo": ("v1_dpo_demo.jsonl", None),
    "v1_multimodal_demo": ("v1_multimodal_demo.jsonl", None),
}


def golden_config(names: list[str]) -> str:
    """YAML text of a config holding the golden datasets ``names``, as LLaMA-Factory v1 loads them."""
    lines = []
    for name in names:
        filename, converter = GOLDEN_SOURCES[name]
        lines += [f"{name}:", f"  path: {SHARED_DATA / filename}", "  source: local"]
        if converter:
            lines.append(f"  converter: {converter}")
    return "\n".join(lines) + "\n"


def read_jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def alpaca_rows(n: int) -> list[dict]:
    return [{"instruction": f"question {i}", "input": "", "output": f"answer {i}"} for i in range(n)]


def chat_rows(turns: list[int]) -> list[dict]:
    """ShareGPT rows with the given number of human/gpt exchanges each."""
    rows = []
    for r, count in enumerate(turns):
        conversation = []
        for t in range(count):
            conversation += [{"from": "human", "value": f"q{r}.{t}"}, {"from": "gpt", "value": f"a{r}.{t}"}]
        rows.append({"conversations": conversation})
    return rows


#: Control tokens of every built-in template, special in the test tokenizers.
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]
CORPUS = ["hello world, how are you today? I am fine, thanks.", "The answer is 42.", "question answer tool call",
          "user assistant system: Be brief. helpful"]


def train_tokenizer(folder: Path | None = None, *, add_bos: bool = False, vocab_size: int = 400,
                    chat_template: str | None = None, corpus: list[str] | None = None):
    """A tiny byte-level BPE trained here (nothing is downloaded), as a PreTrainedTokenizerFast.

    ``add_bos`` gives it a post-processor that prepends BOS, like Llama tokenizers.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator((corpus or CORPUS) * 20, trainer)
    if add_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", backend.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if folder is not None:
        tokenizer.save_pretrained(folder)
    return tokenizer


def widen_vocabulary(folder: Path, size: int) -> int:
    """Give the tokenizer saved in ``folder`` ``size`` ids by adding BPE vocabulary entries no
    text can produce (a character outside the byte-level alphabet, no merge builds them): ids of
    any text stay the same, and a vocabulary past 2^15 ids makes stored tokens 32-bit words.
    Added tokens would do the same, but transformers copies each one when it loads a tokenizer
    (6 s for 40,000); vocabulary entries load with the rest of tokenizer.json. Returns the size."""
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    vocabulary = tokenizer["model"]["vocab"]
    used = max([*vocabulary.values(), *(token["id"] for token in tokenizer["added_tokens"])]) + 1
    vocabulary.update({f"\u2603{number}": number for number in range(used, size)})
    path.write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    return max(size, used)


def assert_matches_golden(found: list[str], golden: Path, *, shown: int = 60) -> None:
    """``found`` is the golden file's lines (``#`` lines are comments); else the test fails with
    the lines that differ as a unified diff, each hunk under the last section line above it (a
    line ``== ...`` or ``table: columns``)."""
    expected = [line for line in golden.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    if found == expected:
        return
    report = []
    for group in difflib.SequenceMatcher(None, expected, found, autojunk=False).get_grouped_opcodes(2):
        first = group[0][1]
        above = expected[:first + 1]
        heads = [next((line for line in reversed(above) if re.match(pattern, line)), None)
                 for pattern in (r"== ", r"\w+: ")]
        report.append(f"@@ {golden.name} line {first + 1}, under {' / '.join(h for h in heads if h) or 'the start'}")
        for tag, i1, i2, j1, j2 in group:
            report += [f"  {line}" for line in expected[i1:i2]] if tag == "equal" else []
            report += [f"- {line}" for line in expected[i1:i2]] if tag in ("replace", "delete") else []
            report += [f"+ {line}" for line in found[j1:j2]] if tag in ("replace", "insert") else []
    more = f"\n... and {len(report) - shown} more lines" if len(report) > shown else ""
    pytest.fail(f"not what {golden.name} holds (- golden, + this run):\n" + "\n".join(report[:shown]) + more,
                pytrace=False)


# Views of the library's own functions that only tests and scripts need.

def exact_draw(n: int, k: int, rng: random.Random) -> list[int]:
    """:func:`dataidx.index.sampling.exact` as a list of offsets."""
    from dataidx.index.sampling import exact

    return exact(n, k, rng).offsets().tolist()


def replacement_draw(n: int, k: int, rng: random.Random) -> list[int]:
    """:func:`dataidx.index.sampling.with_replacement` as a list of offsets (v1's ``random.choices``)."""
    from dataidx.index.sampling import with_replacement

    return with_replacement(n, k, rng).offsets().tolist()


def resample(entries: Sequence[int], size: int | None, weight: float | None, sampling: str, seed: int) -> list[int]:
    """:func:`dataidx.index.sampling.draw` over a list of entries.

    Example::

        >>> resample(range(4), size=2, weight=None, sampling="exact", seed=1)
        [1, 2]
    """
    from dataidx.index.sampling import draw

    return [entries[i] for i in draw(len(entries), size, weight, sampling, seed).offsets().tolist()]


def row_cuts(func: Callable[[dict[str, Any]], dict[str, Any]], raw: dict[str, Any], dataset: str, row: int,
             converter: str) -> list[int | None]:
    """The cuts of one converted row; a sample that cannot be expanded fails like a conversion."""
    from dataidx.convert import row_expansion

    return row_expansion(func, raw, dataset, row, converter)[0]


def insert_mixture_entries(connection: Any, mixture_id: int, first_id: int, entry_ids: Sequence[int], *,
                           min_run: int | None = None) -> None:
    """Positions ``first_id, first_id + 1, ...`` of a mixture, pointing at base entries, through
    ``connection`` (SQLAlchemy's); ``min_run`` defaults to the writer's."""
    import numpy as np

    from dataidx.store.mixtures.positions import MIN_RUN, PositionWriter

    min_run = MIN_RUN if min_run is None else min_run
    positions = PositionWriter(connection, mixture_id, first_id, min_run=min_run)
    positions.add_ids(np.asarray(entry_ids, dtype=np.int64))
    positions.close()


def downgrade_store(store: str | os.PathLike[str], revision: str) -> None:
    """Take a store file back to schema ``revision`` with the migrations' own downgrades."""
    from alembic import command
    from sqlalchemy import create_engine

    from dataidx.store.sqlite.migrations import alembic_config

    engine = create_engine(f"sqlite:///{store}")
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
    engine.dispose()


def migrated_schema(path: str | os.PathLike[str]) -> str:
    """The schema script of a new store made by running every migration (``schema.sql``)."""
    from dataidx.store.sqlite.files import file_engine
    from dataidx.store.sqlite.migrations import upgrade

    engine = file_engine(path)
    try:
        with engine.begin() as connection:
            upgrade(connection)
            statements = connection.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").scalars().all()
            revision = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    finally:
        engine.dispose()
    lines = ["-- Generated by scripts/snapshot_schema.py from the Alembic migrations; do not edit."]
    lines += [statement.strip() + ";" for statement in statements]
    lines.append(f"INSERT INTO alembic_version (version_num) VALUES ('{revision}');")
    return "\n".join(lines) + "\n"


def engine_samples(store: Any, *args: Any, **options: Any) -> list[dict[str, Any]]:
    """Every sample ``DataEngine(store, *args, **options)`` serves, in order; the engine is closed
    after (a test that only looks at what a store serves leaves no handle open)."""
    from dataidx import DataEngine

    with DataEngine(store, *args, **options) as engine:
        return engine[:]  # type: ignore[return-value]


def engine_length(store: Any, *args: Any, **options: Any) -> int:
    """``len(DataEngine(store, *args, **options))``, the engine closed after."""
    from dataidx import DataEngine

    with DataEngine(store, *args, **options) as engine:
        return len(engine)


def one_line_error(result: Any, *fragments: str) -> None:
    """A refusal as the README promises it: exit 1, one line on stderr, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def crafted(store: Path, *statements: str) -> Path:
    """``store`` changed behind dataidx's back with plain sqlite3, as a hostile file would be."""
    with sqlite3.connect(store) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    return store

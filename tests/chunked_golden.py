"""The stores tests/test_chunked_writes.py builds, and their tables as lines of text.

tests/chunked_golden.txt holds those lines as dataidx 0.2.0 (commit 8cbd670) wrote them, holding
each dataset whole. It was written by running this module under that version; only dataidx's
``build`` and ``add_mixture`` are called, which 0.2.0 has too::

    git archive 8cbd670 | tar -x -C /tmp/v020
    PYTHONPATH=/tmp/v020/src python -m tests.chunked_golden > tests/chunked_golden.txt
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import tempfile
from pathlib import Path

from .helpers import write_jsonl, write_yaml

#: Tables a build or a mix writes, compared without their timestamps.
TABLES = ("datasets", "base_entries", "rejected_rows", "mixtures", "mixture_datasets", "mixture_runs",
          "mixture_entries")
UNSTAMPED = ("created_at", "seconds", "files", "arrow_files", "path", "info", "config_text", "config_sha256",
             "dataidx_version",
             # added by revision 0007, after 0.2.0; test_mixtures checks their values
             "epochs", "spec", "spec_fingerprint", "token_budget", "supervised_token_budget",
             # added by revision 0008; tests/test_day_one.py checks its counts
             "empty_rows",
             # added by revision 0020; tests/test_dedup.py checks it
             "excludes")
SAMPLINGS = ("exact", "replacement")
GOLDEN = Path(__file__).with_suffix(".txt")


def write_data(folder: Path) -> tuple[Path, Path]:
    """Five datasets that take every write path: vectorised and row by row, rejects, a
    ``columns`` rename, one entry per row and many; a build config and a mix config that
    shrinks one dataset and grows the others."""
    rng = random.Random(0)
    words = "alpha beta gamma delta epsilon zeta eta theta".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    write_jsonl(folder / "alpaca.jsonl", [{"instruction": text(3), "input": text(rng.randint(0, 2)), "output": text(4)}
                                          for _ in range(150)])
    chats = []
    for _ in range(45):
        turns = []
        for _ in range(rng.randint(1, 4)):
            turns += [{"from": "human", "value": text(2)},
                      {"from": rng.choice(["gpt", "gpt", "weird"]), "value": text(3)}]
        chats.append({"conversations": turns})
    write_jsonl(folder / "sharegpt.jsonl", chats)
    # Row path: a null value fails the converter, rejected under on_error: skip.
    write_jsonl(folder / "mixed.jsonl", [
        {"conversations": [{"from": "human", "value": None if i % 11 == 5 else f"q{i}"},
                           {"from": "gpt", "value": f"a{i}"}, {"from": "human", "value": "more"},
                           {"from": "gpt", "value": "yes"}]}
        for i in range(35)
    ])
    write_jsonl(folder / "messages.jsonl", [
        {"messages": [{"role": "user", "content": [{"type": "text", "value": f"u{i}"}], "loss_weight": 0.0},
                      {"role": "assistant", "content": [{"type": "text", "value": f"a{i}"}],
                       "loss_weight": float(i % 3 != 0)},
                      {"role": "user", "content": [{"type": "text", "value": "again"}], "loss_weight": 0.0},
                      {"role": "assistant", "content": [{"type": "text", "value": "ok"}], "loss_weight": 1.0}]}
        for i in range(20)
    ])
    write_jsonl(folder / "renamed.jsonl", [{"q": text(2), "a": text(2)} for _ in range(13)])
    datasets = f"""
alpaca:
  path: {folder}/alpaca.jsonl
  source: local
  converter: alpaca
  size: 100
  weight: 1.7
sharegpt:
  path: {folder}/sharegpt.jsonl
  source: local
  converter: sharegpt
  weight: 0.37
mixed:
  path: {folder}/mixed.jsonl
  source: local
  converter: sharegpt
  on_error: skip
  size: 125
messages:
  path: {folder}/messages.jsonl
  source: local
  weight: 2.5
renamed:
  path: {folder}/renamed.jsonl
  source: local
  converter: alpaca
  columns:
    instruction: q
    output: a
"""
    config = write_yaml(folder / "build.yaml", datasets)
    mix = write_yaml(folder / "mix.yaml", datasets.replace("size: 100", "size: 450").replace("weight: 0.37",
                                                                                          "weight: 2.5"))
    return config, mix


def table_lines(store: Path) -> list[str]:
    """Every table a build or a mix writes, a header line each, then a line per row, ordered by
    every column. Rows that step by one in some integer columns and hold the others are one line,
    ``first..last`` in the columns that step: ``1..150 1 0..149 2`` is 150 entries of dataset 1."""
    connection = sqlite3.connect(store)
    lines = []
    for table in TABLES:
        columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")') if row[1] not in UNSTAMPED]
        order = ", ".join(str(i + 1) for i in range(len(columns)))
        rows = connection.execute(f'SELECT {", ".join(columns)} FROM "{table}" ORDER BY {order}').fetchall()
        lines.append(f"{table}: {' '.join(columns)}")
        lines += _runs(rows)
    connection.close()
    return lines


def _steps(row: tuple, after: tuple) -> tuple[int, ...] | None:
    """Per column 1 where an integer goes up by one, 0 where the value stays; None otherwise."""
    steps = []
    for a, b in zip(row, after, strict=True):
        if type(a) is int and type(b) is int and b - a == 1:
            steps.append(1)
        elif a == b and type(a) is type(b):
            steps.append(0)
        else:
            return None
    return tuple(steps)


def _runs(rows: list[tuple]) -> list[str]:
    lines, i = [], 0
    while i < len(rows):
        j = i
        step = _steps(rows[i], rows[i + 1]) if i + 1 < len(rows) else None
        if step is not None and 1 in step:
            j = i + 1
            while j + 1 < len(rows) and _steps(rows[j], rows[j + 1]) == step:
                j += 1
        lines.append(" ".join(json.dumps(a) if a == b else f"{a}..{b}" for a, b in zip(rows[i], rows[j], strict=True)))
        i = j + 1
    return lines


def store_lines(folder: Path) -> list[str]:
    """Build and mix the data in ``folder`` under each sampling mode; the tables of both stores."""
    from dataidx.index import add_mixture, build

    config, mix = write_data(folder)
    lines = []
    for sampling in SAMPLINGS:
        store = folder / f"{sampling}.db"
        build(config, store, seed=11, sampling=sampling)
        add_mixture(store, mix, "grown", seed=5, sampling=sampling)
        lines.append(f"== sampling {sampling}")
        lines += table_lines(store)
    return lines


if __name__ == "__main__":
    import dataidx

    with tempfile.TemporaryDirectory() as folder:
        found = store_lines(Path(folder))
    sys.stdout.write("# The tables of the stores tests/test_chunked_writes.py builds, "
                     f"as dataidx {dataidx.__version__} wrote them: see tests/chunked_golden.py.\n"
                     "# A line is a row, or rows that step by one in the columns shown first..last.\n")
    sys.stdout.write("".join(line + "\n" for line in found))

"""What bench_scale.py, bench_tokens_scale.py and bench_budgets.py share: a command timed in a
fresh process with its peak RSS, a snippet's JSON, the fetch snippet, a spec of lognormal
lengths written by SQL over every base entry, and the working folder with its HF cache.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scale_data import generate
from scratch import scratch_folder

REPO = Path(__file__).resolve().parents[1]

DATAIDX = [sys.executable, "-m", "dataidx"]
# A wrapper process whose only child is the command: its peak RSS is the command's alone.
MEASURE = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
           "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
           "print(json.dumps([time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
FETCHES = 20_000


def measured(*command: str, env: dict[str, str]) -> tuple[float, float]:
    """``(seconds, peak RSS in MiB)`` of a command in a fresh process."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], check=True, capture_output=True, text=True,
                         env=env).stdout
    seconds, peak = json.loads(out)
    return seconds, peak / 1024


def snippet(code: str, *args: str, env: dict[str, str]) -> list:
    """The JSON a snippet prints, run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


FETCH = """
import json, random, sys, time
t = time.perf_counter()
from dataidx import DataEngine
engine = DataEngine(sys.argv[1]); engine[0]
first = time.perf_counter() - t
rng = random.Random(1)
indices = [rng.randrange(len(engine)) for _ in range({fetches})]
t = time.perf_counter()
for i in indices: engine[i]
single = len(indices) / (time.perf_counter() - t)
t = time.perf_counter()
for start in range(0, len(indices), 256): engine[indices[start:start + 256]]
batched = len(indices) / (time.perf_counter() - t)
print(json.dumps([first, single, batched]))
"""


def synthetic_spec(store: Path, cutoff: int = 4096) -> None:
    """Spec 'bench' over every base entry: lognormal lengths (median ~400) written by SQL, a
    million at a time, with the spec row of a real render of a small store, and the summaries
    and length arrays ``dataidx render`` writes."""
    small = store.parent / "spec-source"
    shutil.rmtree(small, ignore_errors=True)
    from dataidx.index import build
    from dataidx.render import RenderRequest, render_store
    from dataidx.store.specs.summaries import insert_spec_summary
    from dataidx.store.specs.writes import insert_length_chunks
    from dataidx.store.sqlite.files import file_engine

    build(generate(small, 50), small / "small.db")
    render_store(RenderRequest(small / "small.db", REPO / "data" / "demo_tokenizer", cutoff=cutoff, name="bench",
                               jobs=1))
    with sqlite3.connect(small / "small.db") as source:
        columns = [row[1] for row in source.execute("PRAGMA table_info(render_specs)") if row[1] != "id"]
        spec = source.execute(f"SELECT {', '.join(columns)} FROM render_specs").fetchone()
    connection = sqlite3.connect(store)
    first, last = connection.execute("SELECT min(id), max(id) FROM base_entries").fetchone()
    values = dict(zip(columns, spec), entries=last - first + 1, kept=last - first + 1)
    connection.execute(f"INSERT INTO render_specs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                       list(values.values()))
    spec_id = connection.execute("SELECT id FROM render_specs WHERE name = 'bench'").fetchone()[0]
    rng = np.random.default_rng(0)
    for start in range(first, last + 1, 1_000_000):
        count = min(1_000_000, last + 1 - start)
        lengths = np.clip(rng.lognormal(6.0, 0.9, count).astype(np.int64), 16, cutoff)
        connection.execute("INSERT INTO entry_renders (spec_id, entry_id, tokens, supervised_tokens, full_tokens, "
                           "status, detail) SELECT ?, ? + key, value, value / 3, value, 'ok', NULL FROM json_each(?)",
                           (spec_id, start, json.dumps(lengths.tolist())))
    connection.commit()
    connection.close()
    engine = file_engine(store)  # the summaries and length arrays dataidx render writes with a spec
    with engine.begin() as written:
        insert_spec_summary(written, spec_id)
        insert_length_chunks(written, spec_id)
    engine.dispose()


def prepared_work(work: Path | None, prefix: str) -> tuple[Path, dict[str, str]]:
    """The working folder (a temporary one when None) and the environment whose HF cache lives in it."""
    work = work or scratch_folder(prefix)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_DATASETS_CACHE": str(work / "hf"), "HF_DATASETS_OFFLINE": "1"}
    os.environ.update(env)
    return work, env


def rows_by_size(sizes: list[int], work: Path, env: dict[str, str],
                 row_of: Callable[[Path, int, dict[str, str]], dict[str, str]]) -> dict[int, dict[str, str]]:
    """``row_of(work, entries, env)`` for each size, saying on stderr when each is done."""
    rows = {}
    for entries in sizes:
        rows[entries] = row_of(work, entries, env)
        print(f"{entries:,} entries done", file=sys.stderr)
    return rows

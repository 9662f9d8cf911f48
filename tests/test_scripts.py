"""Every benchmark in scripts/ runs to its end at a tiny size, in a process of its own.

Nothing else runs them between measurements, and a schema change once broke two of them unseen.
The other scripts write files of the repository (make_demo_tokenizer.py, snapshot_schema.py:
test_store checks schema.sql instead), need LLaMA-Factory's source (conformance.py,
batching_goldens.py) or datatrove
(datatrove_dedup.py, which bench_dedup.py runs with --datatrove), or are a module of the
benchmarks (scale_data.py, planted_corpus.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .helpers import REPO
from .postgres_server import server_binaries

pytestmark = pytest.mark.slow  # each takes 10-60 s

#: Arguments of each run, and a line (or the lines) its report must hold.
SMOKES: dict[str, tuple[list[str], str | tuple[str, ...]]] = {
    # bench.py in two halves that run side by side: the main store's figures, then every section.
    "bench": (["bench.py", "--alpaca", "200", "--sharegpt", "50", "--fetches", "100", "--loader", "200", "--pack",
               "1000", "--render", "100", "--without-sections", "--rounds", "1"],
              "dataidx pack on those lengths"),
    "bench sections": (["bench.py", "--families", "100", "--tokens-rows", "200", "--tokens-fetches", "50",
                        "--tokens-loader", "200", "--orders-positions", "5000", "--merges-conversations", "60",
                        "--render-rows", "400", "--media-images", "5", "--balance-entries", "5000", "--rounds", "1",
                        *(f"--{name}-only" for name in ("tokens", "orders", "merges", "families", "render", "media",
                                                        "balance"))],
                       ("1 process: two passes -> one per prefix", "counts equal on",
                        "dataidx, from stored tokens (features on fetch)", "balanced by compute")),
    "bench_tokens_scale": (["bench_tokens_scale.py", "--entries", "2000", "--work", "{tmp}/tokens"],
                           "export --format parquet"),
    "bench_budgets": (["bench_budgets.py", "--entries", "2000"], "budgets against what each epoch drew"),
    "bench_postgres": (["bench_postgres.py", "--alpaca", "400", "--sharegpt", "100", "--fetches", "100", "--loader",
                        "200"], "PostgreSQL / file"),
    "bench_report": (["bench_report.py", "--alpaca", "400", "--sharegpt", "100"], "dataidx report (fresh process"),
    # rendering in shards: serial against 2 local shards, then a merge of synthetic parts (Ray left out: its start-up)
    "bench_shards": (["bench_shards.py", "--entries", "600", "--merge-entries", "20000", "--merge-shards", "4",
                      "--rounds", "1", "--no-ray"],
                     ("(b) 2 shards, --runner local", "rows/s into SQLite", "(e) on paper")),
    # near duplicates and leaks on a planted corpus: recall, precision, time
    "bench_balance": (["bench_balance.py", "--entries", "5000", "--world-size", "4"], "balanced by compute"),
    "bench_dedup": (["bench_dedup.py", "--rows", "1500", "--items", "150"],
                    ("near dedup: recall, near copies", "decontamination: precision", "side by side")),
    "bench_scale": (["bench_scale.py", "--entries", "2000", "--render", "100", "--work", "{tmp}/scale"],
                    "`dataidx pack` 4096, all entries (s)"),
    # every bound in one run, as its docstring shows: one tokenizer trained for the three
    "bounds": (["bounds.py", "turns", "report", "template", "--sizes", "10", "--datasets", "3", "--budget", "0.5",
                "--crafted", "2"], ("one row of N one-character turns", "3 datasets", "ran past its budget of 0.5 s")),
}


@pytest.mark.parametrize("name", list(SMOKES))
def test_a_benchmark_runs_to_its_end_at_a_tiny_size(name: str, tmp_path: Path) -> None:
    arguments, said = SMOKES[name]
    if name == "bench_postgres" and server_binaries() is None:
        if os.environ.get("DATAIDX_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL's server binaries (initdb) are needed for scripts/bench_postgres.py")
        pytest.skip("no PostgreSQL server binaries on this machine")
    script, *rest = arguments
    # Their temporary folders go to one of their own; a server's must be one the postgres user can
    # enter, which tmp_path is not.
    temporary = tmp_path
    if name == "bench_postgres":
        temporary = Path(tempfile.mkdtemp(prefix="dataidx-smoke-"))
        temporary.chmod(0o755)
    arguments = [a.format(tmp=tmp_path) for a in rest]
    try:
        result = subprocess.run([sys.executable, str(REPO / "scripts" / script), *arguments], cwd=REPO,
                                env={**os.environ, "TMPDIR": str(temporary)}, capture_output=True, text=True,
                                timeout=600)
        left = sorted(path.name for path in temporary.iterdir() if str(path) not in arguments)
    finally:
        if temporary != tmp_path:
            shutil.rmtree(temporary, ignore_errors=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for line in (said,) if isinstance(said, str) else said:
        assert line in result.stdout, result.stdout[-3000:]
    # Its scratch folders are gone (scripts/scratch.py); a folder named with --work is kept.
    assert not left, f"{script} left {left} in the temporary directory"

"""Crash safety and races for real: SIGKILL a build or a mix at several moments, concurrent
writers, reading while rebuilding."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dataidx import DataEngine
from dataidx.convert import converters, register_converter
from dataidx.index import add_mixture, build
from dataidx.store import store_info

from .helpers import alpaca_rows, engine_length, write_jsonl, write_yaml

pytestmark = pytest.mark.slow  # processes killed with SIGKILL mid-write

# Registers a deliberately slow converter, says "started", then builds or mixes: the kill lands
# inside the work, not inside Python's start-up.
WORKER = """
import sys
from dataidx.convert import converters, register_converter
from dataidx.index import build
from dataidx.convert import converters, register_converter
from dataidx.store import store_info
from dataidx.index import add_mixture

alpaca = converters.get("alpaca").func

@register_converter("slow_alpaca")
def slow_alpaca(row):
    sum(range(2000))
    return alpaca(row)

print("started", flush=True)
if sys.argv[1] == "build":
    build(sys.argv[2], sys.argv[3])
else:
    add_mixture(sys.argv[3], sys.argv[2], "crash", seed=5, sampling=sys.argv[4] if len(sys.argv) > 4 else "exact")
print("finished", flush=True)
"""


# The workers' slow converter, registered here too so the test can read what they built.
if "slow_alpaca" not in converters:
    register_converter("slow_alpaca")(converters.get("alpaca").func)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_whole(store: Path, expected_digest: str, entries: int) -> None:
    assert digest(store) == expected_digest
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()
    with DataEngine(store) as engine:
        assert len(engine) == entries
        assert engine[-1]["_dataset_name"] == "alp"


def kill_after(args: list[str], delay: float) -> bool:
    """Run the worker, SIGKILL it ``delay`` s after it started working; True if it died mid-work."""
    process = subprocess.Popen([sys.executable, "-c", WORKER, *args], stdout=subprocess.PIPE, text=True,
                               env=os.environ.copy())
    assert process.stdout.readline().strip() == "started"
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return process.returncode == -signal.SIGKILL and process.stdout.read().strip() != "finished"


def kill_repeatedly(args: list[str], store: Path, delays: tuple[float, ...], old: int, new: int) -> int:
    """Kill a writer at each delay; the store must be the previous one whole, or, where the
    writer won the race, the new one whole. Returns how many writers died mid-work."""
    killed = 0
    for delay in delays:
        before = digest(store)
        if kill_after(args, delay):
            killed += 1
            assert_whole(store, before, old)
        else:
            assert_whole(store, digest(store), new)
            old = new
    return killed


@pytest.fixture
def slow_setup(tmp_path: Path):
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(60_000))
    slow = write_yaml(tmp_path / "slow.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: slow_alpaca\n")
    fast = write_yaml(tmp_path / "fast.yaml", f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n"
                                              "  size: 1000\n")
    store = tmp_path / "store.db"
    build(fast, store)
    return tmp_path, slow, fast, store


def test_kill_9_during_build_never_damages_the_store(slow_setup) -> None:
    folder, slow, fast, store = slow_setup
    killed = kill_repeatedly(["build", str(slow), str(store)], store, (0.05, 0.3, 0.6, 1.0, 1.5), 1000, 60_000)
    assert killed >= 3
    # Killed writers leave only their own temporaries, which the next writer removes.
    strays = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert all(name.startswith(".store.db.") for name in strays)
    build(fast, store)
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_kill_9_during_mix_never_damages_the_store(slow_setup) -> None:
    folder, slow, fast, store = slow_setup
    big = write_yaml(folder / "big.yaml", f"alp:\n  path: {folder / 'a.jsonl'}\n  source: local\n"
                                          "  converter: alpaca\n  weight: 40\n")
    store_big = folder / "big.db"
    build(write_yaml(folder / "all.yaml", big.read_text().replace("  weight: 40\n", "")), store_big)
    # With replacement every position is drawn and written one by one: slow enough to kill
    # (an exact draw of whole repeats is 40 run rows, done before the first kill).
    killed = kill_repeatedly(["mix", str(big), str(store_big), "replacement"], store_big,
                             (0.05, 0.2, 0.4, 0.8), 60_000, 60_000)
    assert killed >= 2
    assert [m["name"] for m in store_info(store_big)["mixtures"]] in (["default"], ["default", "crash"])
    add_mixture(store_big, big, "after", seed=1)  # also clears the killed writers' temporaries
    assert engine_length(store_big, mixture="after") == 2_400_000
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


READER = """
import json, random, sys, time
from dataidx import DataEngine

store, seconds = sys.argv[1], float(sys.argv[2])
first = DataEngine(store)
first[0]
print("ready", flush=True)
errors, seen = [], []
deadline = time.time() + seconds
rng = random.Random(0)
while time.time() < deadline:
    try:
        for _ in range(50):
            value = first[rng.randrange(len(first))]["messages"][-1]["content"][0]["value"]
            if not value.startswith("A"):
                errors.append("old engine served " + value)
        fresh = DataEngine(store)
        values = {s["messages"][-1]["content"][0]["value"][0] for s in fresh[:]}
        if len(values) != 1:
            errors.append("a fresh engine mixed versions: " + repr(values))
        seen.append(values.pop())
    except Exception as exc:
        errors.append(type(exc).__name__ + ": " + str(exc))
print(json.dumps({"errors": errors[:5], "seen": sorted(set(seen)), "opens": len(seen)}))
"""


def test_readers_keep_the_old_store_while_it_is_rebuilt(tmp_path: Path) -> None:
    def rows(prefix: str) -> list[dict]:
        return [{"instruction": f"q{i}", "output": f"{prefix} {i}"} for i in range(200)]

    configs = {}
    for prefix in "AB":
        data = write_jsonl(tmp_path / f"{prefix}.jsonl", rows(prefix))
        configs[prefix] = write_yaml(tmp_path / f"{prefix}.yaml", f"alp:\n  path: {data}\n  source: local\n"
                                                                  "  converter: alpaca\n")
    store = tmp_path / "store.db"
    build(configs["A"], store)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(store), "5"], stdout=subprocess.PIPE, text=True,
                              env=os.environ.copy())
    assert reader.stdout.readline().strip() == "ready"
    rebuilds = 0
    while reader.poll() is None and rebuilds < 12:
        build(configs["B" if rebuilds % 2 == 0 else "A"], store)
        rebuilds += 1
        time.sleep(0.2)
    report = json.loads(reader.communicate(timeout=60)[0])
    assert report["errors"] == []
    assert report["seen"] == ["A", "B"] and report["opens"] > 5


def test_concurrent_mixes_both_land(tmp_path: Path, alpaca3k_store: Path) -> None:
    config = write_yaml(tmp_path / "m.yaml", f"alp:\n  path: {tmp_path / 'a.jsonl'}\n  weight: 300\n")
    processes = [
        subprocess.Popen([sys.executable, "-m", "dataidx", "mix", str(alpaca3k_store), str(config), "--name", name],
                         stderr=subprocess.PIPE, env=os.environ.copy())
        for name in ("first", "second", "third")
    ]
    assert [p.wait() for p in processes] == [0, 0, 0]
    assert sorted(m["name"] for m in store_info(alpaca3k_store)["mixtures"]) == ["default", "first", "second", "third"]
    assert all(engine_length(alpaca3k_store, mixture=name) == 900_000 for name in ("first", "second", "third"))

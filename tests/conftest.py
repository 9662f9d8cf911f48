"""Shared fixtures: HF caches in a temporary folder, offline mode, real files and stores."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from .helpers import HYPOTHESIS_PROFILE, REPO, alpaca_rows, train_tokenizer, widen_vocabulary, write_jsonl, write_yaml

# Set before anything imports `datasets`, which reads these once at import time.
_CACHE = tempfile.mkdtemp(prefix="dataidx-hf-cache-")
os.environ["HF_HOME"] = _CACHE
os.environ["HF_DATASETS_CACHE"] = os.path.join(_CACHE, "datasets")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    """Load the Hypothesis profile before any test module is imported, so every @settings starts
    from it. Deadlines and the too-slow health check time examples, which a busy machine makes
    flaky: neither is used. pytest-xdist's controller runs no test and skips the import."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first, the scripts' smokes (10-35 s each) ahead of them, each group in
    its collected order: pytest-xdist hands tests out in this order, so a worker's last tests are
    short ones and the two finish together, instead of one running a benchmark it took last while
    the other waits."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item.path.name != "test_scripts.py"))


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., Path]:
    """Build a store from YAML text (or a path) into tmp_path; returns the store path."""
    from dataidx.index import build

    counter = iter(range(1000))

    def _make(config: str | Path, **kwargs) -> Path:
        number = next(counter)
        if isinstance(config, str) and "\n" in config:
            config = write_yaml(tmp_path / f"config{number}.yaml", config)
        store = tmp_path / f"store{number}.db"
        build(config, store, **kwargs)
        return store

    return _make


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The README's demo (data/demo_sft.yaml) built once per session (per xdist worker), for
    tests that only read it; a test that writes takes ``demo_copy``. Checked unchanged at the end."""
    from dataidx.index import build

    store = tmp_path_factory.mktemp("demo") / "demo.db"
    build(REPO / "data" / "demo_sft.yaml", store)
    built = store.read_bytes()
    yield store
    assert store.read_bytes() == built, "a test wrote to the shared demo store: give it demo_copy"


@pytest.fixture
def demo_copy(demo_store: Path, tmp_path: Path) -> Path:
    """This test's own copy of the demo store (``tmp_path / "demo.db"``), to write to."""
    return Path(shutil.copyfile(demo_store, tmp_path / "demo.db"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny tokenizer folder whose own chat template is the built-in ChatML."""
    from dataidx.render import CHATML

    folder = tmp_path_factory.mktemp("tiny-tokenizer")
    train_tokenizer(folder, chat_template=CHATML)
    return folder


@pytest.fixture(scope="session")
def wide_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer widened to 33,400 ids: a vocabulary past 2^15 ids, so stored tokens
    take 32-bit words (no text produces the new ids: ids are the tiny one's)."""
    from dataidx.render import CHATML

    folder = tmp_path_factory.mktemp("wide-tokenizer")
    train_tokenizer(folder, chat_template=CHATML)
    widen_vocabulary(folder, 33_400)
    return folder


@pytest.fixture
def alpaca3k_store(tmp_path: Path, make_store) -> Path:
    """A store of 3,000 alpaca rows from a file in tmp_path (``a.jsonl``)."""
    data = write_jsonl(tmp_path / "a.jsonl", alpaca_rows(3000))
    return make_store(f"alp:\n  path: {data}\n  source: local\n  converter: alpaca\n")


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium driven by Playwright (never a downloaded browser); skipped without it, unless
    DATAIDX_REQUIRE_BROWSER says it must be there. One per module: Playwright's sync API holds an
    event loop while it runs, which asyncio.run elsewhere (Datasette's tests) may not share."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    playwright = pytest.importorskip("playwright.sync_api") if chromium else None
    if chromium is None or playwright is None:
        if os.environ.get("DATAIDX_REQUIRE_BROWSER"):
            pytest.fail("Debian's chromium (and the playwright package) are needed for the browser tests")
        pytest.skip("no chromium on this machine")
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def exit_stack() -> Iterator[ExitStack]:
    """An ExitStack unwound when the test ends: ``exit_stack.enter_context(DataEngine(...))`` for
    readers a test makes in loops, lambdas or as arguments, which a ``with`` block cannot hold."""
    with ExitStack() as stack:
        yield stack


@pytest.fixture(autouse=True)
def no_store_handle_left_open() -> Iterator[None]:
    """Fail a test that leaves a store handle open: a reader, engine or plan it made and did not
    close (``close()`` or ``with``), whose connection would wait for the garbage collector.
    Handles of wider fixtures, opened before the test, are theirs to close."""
    from dataidx.store.handle import open_handles

    before = set(open_handles()[0])
    yield
    still, collected = open_handles()
    left = [handle for handle in still if handle not in before]
    for handle in left:  # reported here, once, not again when the collector finds them
        handle.close()
    if left or collected:
        pytest.fail(f"store handles left open: {[str(h.name) for h in left] + collected} (close() or with)",
                    pytrace=False)

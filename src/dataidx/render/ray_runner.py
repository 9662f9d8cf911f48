"""``dataidx render --shards N --runner ray``: one plain Ray task per shard, on the cluster at
``--address`` (or ``RAY_ADDRESS``), on Ray as this process already runs it, or on a local cluster
started for the run. A task renders its shard's part (:func:`.shards.render_shard`); the merge runs
here once all are done. A shard whose part is done already is skipped, so after a Ctrl-C (pending
tasks are cancelled; finished parts stay) or a lost node the same command renders only the rest.

Ray runs a task again when its worker or node dies (``max_retries``), never when dataidx refused
it: a refused shard fails once, and its one-line error is raised here as itself, not as Ray's
traceback, so the CLI prints one line.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import DataidxError, UsageError
from ..progress import CountProgress
from .request import RenderRequest
from .shards import ShardOutcome, base_entries, render_shard

#: Ray runs a task again this many times when its worker or node is lost mid-shard.
RETRIES = 3
#: A local cluster's object store: tasks pass a request and an outcome (parts go to disk), so
#: Ray's default of 30% of memory is wasted; 128 MiB is over Ray's least (75 MiB) and fits CI.
OBJECT_STORE_BYTES = 128 * 1024 * 1024
#: Seconds a cancelled task has to stop (removing its part's temporary files) before it is killed.
STOP_SECONDS = 10
#: Ray's own INFO lines (and its token-auth notice) are noise on a render's stderr.
LOGGING_LEVEL = logging.ERROR


def render_on_ray(request: RenderRequest, shards: int, parts: Path, *, address: str | None = None,
                  progress: CountProgress | None = None) -> list[ShardOutcome]:
    """Every shard of ``request`` as a Ray task writing its part into ``parts``; what each shard
    did (rendered, or skipped as done), in shard order. ``progress`` counts the entries of the
    shards done, as the local runner's does."""
    with ray_cluster(address) as ray:
        task = ray.remote(max_retries=RETRIES, retry_exceptions=False)(_render_shard_task)
        one = replace(request, jobs=1)
        here = os.getcwd()
        pending = [task.remote(one, shard, shards, os.fspath(parts), here) for shard in range(shards)]
        return _collect(ray, pending, base_entries(request), progress)


@contextmanager
def ray_cluster(address: str | None = None) -> Iterator[Any]:
    """Ray, initialized: as this process runs it already (a test's cluster, a notebook's), else
    joined to ``address`` (or ``RAY_ADDRESS``), else a local cluster started here, its files in a
    temporary folder where Ray would put them (``RAY_TMPDIR``, else ``TMPDIR``; a short name, as
    its sockets' paths must fit 107 bytes). What is started here is shut down (and its folder
    removed) on leaving, or when the start itself fails or is interrupted."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    joining = address is not None or bool(os.environ.get("RAY_ADDRESS"))
    folder = None if joining else tempfile.mkdtemp(prefix="ray-", dir=os.environ.get("RAY_TMPDIR") or None)
    try:
        _start(ray, address, folder)
        yield ray
    finally:
        ray.shutdown()  # a no-op where the start failed before Ray was up
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _start(ray: Any, address: str | None, folder: str | None) -> None:
    """Join ``address`` (or ``RAY_ADDRESS``), or, given a ``folder`` for its files, start a local
    cluster of this run's own: never another's (address ``local``), no dashboard, a small object
    store, Ray's logs quiet."""
    if folder is None:
        ray.init(address=address, log_to_driver=False, logging_level=LOGGING_LEVEL)
        return
    try:
        ray.init(address="local", _temp_dir=folder, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
                 log_to_driver=False, logging_level=LOGGING_LEVEL)
    except OSError as error:
        if "AF_UNIX path length" not in str(error):
            raise
        raise UsageError(f"a local Ray cluster's sockets in {folder} pass the 107 bytes a socket's path may take: set "
                         "RAY_TMPDIR to a short folder (as /tmp)") from None


def import_ray() -> Any:
    """The ``ray`` module, or a one-line UsageError saying how to install it."""
    try:
        import ray  # the dataidx[ray] extra: only this runner needs Ray
    except ImportError:
        raise UsageError("--runner ray needs Ray: pip install 'dataidx[ray]' (or ray), or use --runner local") from None
    return ray


def _collect(ray: Any, pending: list[Any], total: int, progress: CountProgress | None) -> list[ShardOutcome]:
    """Each task's outcome as it finishes. On a failure or Ctrl-C the tasks not done are
    cancelled (:func:`_cancel`); the parts already written stay, complete, for the next run to skip."""
    done: list[ShardOutcome] = []
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done.append(_outcome(ray, ready[0]))
            if progress is not None:
                progress(sum(outcome.entries for outcome in done), total)
    finally:
        _cancel(ray, pending)
    return sorted(done, key=lambda outcome: outcome.shard)


def _cancel(ray: Any, pending: list[Any]) -> None:
    """Stop the tasks not done: each is interrupted, so its part's temporary files are removed as
    it unwinds (a killed worker leaves them behind), and killed if not stopped in STOP_SECONDS."""
    if not pending:
        return
    for ref in pending:
        ray.cancel(ref)
    _, running = ray.wait(pending, num_returns=len(pending), timeout=STOP_SECONDS)
    for ref in running:
        ray.cancel(ref, force=True)


def _outcome(ray: Any, ref: Any) -> ShardOutcome:
    """A task's outcome; a shard dataidx refused raises its own error (one line), not Ray's."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, DataidxError):
            raise error.cause from None
        raise


def _render_shard_task(request: RenderRequest, shard: int, shards: int, parts: str, folder: str) -> ShardOutcome:
    """One shard, in a Ray worker. Relative paths (store, tokenizer, parts) are the driver's: the
    task works in the driver's folder where its machine has it (a local cluster, shared storage)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # a task per core fills the cores
    if os.path.isdir(folder):
        os.chdir(folder)
    return render_shard(request, shard, shards, parts)

"""``dataidx render --shards N --runner ray``: one plain Ray task per shard, retried by Ray, on the
cluster at ``--address`` or a local one started for the run. A task renders its shard's part
(:func:`.shards.render_shard`); the merge runs here once all are done. A shard whose part is done
already is skipped, so after a Ctrl-C (or a lost node) the same command renders only the rest."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..progress import CountProgress
from .request import RenderRequest
from .shards import render_shard

#: Ray runs a failed task again this many times (a node lost mid-shard).
RETRIES = 3


def render_on_ray(request: RenderRequest, shards: int, parts: Path, *, address: str | None = None,
                  progress: CountProgress | None = None) -> None:
    """Every shard of ``request`` as a Ray task writing its part into ``parts``."""
    try:
        import ray  # type: ignore[import-not-found]  # the dataidx[ray] extra: only this runner needs it
    except ImportError:
        raise UsageError("--runner ray needs Ray: pip install 'dataidx[ray]' (or ray), or use --runner local") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = ray.remote(max_retries=RETRIES, retry_exceptions=False)(_render_shard_task)
    one = replace(request, jobs=1)
    pending: list[Any] = [task.remote(one, shard, shards, os.fspath(parts)) for shard in range(shards)]
    done = 0
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            ray.get(ready[0])  # a shard that failed raises here; the parts done stay usable
            done += 1
            if progress is not None:
                progress(done, shards)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def _render_shard_task(request: RenderRequest, shard: int, shards: int, parts: str) -> int:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # a task per core fills the cores
    return render_shard(request, shard, shards, parts).entries

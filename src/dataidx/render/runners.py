"""Where a render in shards runs: this machine's processes (``--runner local``) or Ray tasks
(``--runner ray``); either way each shard writes its part (:mod:`.shards`) and one merge stores
them. A Slurm array needs no runner: each task runs ``dataidx render ... --shard
$SLURM_ARRAY_TASK_ID/N --parts DIR``, and one ``dataidx merge`` follows (docs/scale-out.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import UsageError
from ..progress import CountProgress
from ..store import store_location
from .lengths import RenderSummary
from .ray_runner import render_on_ray
from .request import RenderRequest
from .shards import merge_parts, render_in_shards, up_to_date, with_fixed_clock

RUNNERS = ("local", "ray")


def run_shards(request: RenderRequest, shards: int, *, runner: str = "local", address: str | None = None,
               parts: str | os.PathLike[str] | None = None, progress: CountProgress | None = None,
               merged: CountProgress | None = None) -> RenderSummary:
    """Render ``request`` in ``shards`` shards on ``runner``, then merge them. Parts go to
    ``parts`` (kept), or to ``STORE.parts`` beside a store file, removed once merged; a part done
    by an earlier, interrupted run is skipped."""
    if runner not in RUNNERS:
        raise UsageError(f"runner {runner!r}: one of {', '.join(RUNNERS)}")
    if address is not None and runner != "ray":
        raise UsageError("--address names a Ray cluster: it goes with --runner ray")
    folder = Path(parts) if parts is not None else _default_parts(request)
    request = with_fixed_clock(request)  # one time for every shard of a template that reads the date
    if runner == "ray":
        stored = up_to_date(request)
        if stored is not None:  # stored rendered this way already: no cluster to start, as a serial render
            return stored
        render_on_ray(request, shards, folder, address=address, progress=progress)
    else:  # its shards find a spec stored this way already, and so does the merge
        render_in_shards(request, shards, folder, processes=request.jobs, progress=progress)
    summary = merge_parts(request.store, folder, progress=merged, request=request)
    if parts is None:
        shutil.rmtree(folder, ignore_errors=True)
    return summary


def _default_parts(request: RenderRequest) -> Path:
    """``STORE.parts`` beside a store file; a PostgreSQL store needs ``--parts`` (it has no folder)."""
    location = store_location(request.store)
    if not isinstance(location, Path):
        raise UsageError("a PostgreSQL store has no folder for its parts: give --parts DIR (shared storage)")
    return location.with_name(location.name + ".parts")

"""Where dataidx keeps files of its own on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$DATAIDX_CACHE``, else ``$XDG_CACHE_HOME/dataidx``, else ``~/.cache/dataidx``: stores that
    ``DataEngine("x.yaml")`` built, and streams materialised for stores in PostgreSQL."""
    if os.environ.get("DATAIDX_CACHE"):
        return Path(os.environ["DATAIDX_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dataidx"

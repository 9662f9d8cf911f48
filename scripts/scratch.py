"""A benchmark's scratch folder: made in the temporary directory, removed when the script exits.

A full ``bench.py`` run leaves stores of hundreds of MB and ``bench_scale.py`` gigabytes; left in
``/tmp`` run after run they fill the disk. A folder a user names (``--work``) is kept.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_folder(prefix: str) -> Path:
    """A new folder named ``prefix...`` in the temporary directory, removed at exit (a normal one,
    ``sys.exit`` or an uncaught error; a killed process leaves it)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder

"""An export's folder appears under its name only when complete: written under a hidden temporary
name beside it, synced, and renamed into place (an old folder, with ``--force``, is moved aside
first and removed after), so a crash, a full disk or Ctrl-C leaves no folder that looks finished."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataidxError, ExportError


@contextmanager
def publishing(output: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary folder to write into, renamed to ``output`` when the block ends without error
    and removed when it does not."""
    target = Path(output).resolve()  # "." has no name to put a temporary one beside
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        temporary.mkdir()
        yield temporary
        for file in temporary.iterdir():
            with open(file, "rb") as opened:
                os.fsync(opened.fileno())
        old = target.with_name(f".{target.name}.{os.getpid()}.old")
        if target.exists():
            os.replace(target, old)
        os.replace(temporary, target)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        if isinstance(exc, DataidxError):  # already one line (a source gone: SourceError)
            raise
        raise ExportError(f"{output}: cannot write the export: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)

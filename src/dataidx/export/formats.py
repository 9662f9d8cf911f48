"""The registry of token formats: each name ``dataidx export --format`` takes, and its writer (a
:class:`.TokenWriter` subclass). ``FORMATS`` and the CLI's choices are read from it.

Every ``dataidx`` command reads the CLI's choices when it starts, so this module imports no
writer: each is named by module and class and imported when its format is asked for, as the
packages' faces import their names (NumPy and pyarrow stay out of ``dataidx info``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from .writer import TokenWriter

#: Each format's writer: the module (in this package) and the class; a class's ``format`` is its key.
WRITERS: dict[str, tuple[str, str]] = {
    "megatron": (".megatron", "MegatronWriter"),
    "olmo": (".olmo", "OlmoWriter"),
    "parquet": (".parquet", "ParquetTokenWriter"),
}
FORMATS = tuple(WRITERS)


def writer_for(format: str) -> type[TokenWriter]:
    """The writer of token format ``format``; an unknown name is one line naming the known ones."""
    if format not in WRITERS:
        raise UsageError(f"unknown token export format '{format}' (known: {', '.join(FORMATS)})")
    module, name = WRITERS[format]
    return getattr(import_module(module, __package__), name)

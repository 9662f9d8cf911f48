"""One protocol for every token format. A format only encodes decoded words into its own files;
:class:`TokenWriter` does what every format needs alike (mosaicml/streaming's ``Writer`` base
splits the work the same way): the folder that appears only when complete, creating its files,
closing every one of them on error too, removing scratch files, counting what was written, and
the summary and manifest of a finished export. A new format is a subclass with :meth:`encode`
(and :meth:`complete` if it writes something once every word is in), listed in :mod:`.formats`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar, Protocol, TypeVar

import numpy as np

from .._version import __version__
from .output import publishing
from .words import Words

logger = logging.getLogger(__name__)

#: What every export folder holds besides the format's files: what it was made from.
MANIFEST = "dataidx_export.json"


@dataclass(frozen=True)
class Shape:
    """What a format is told before the first words: their width, whether each document is a pack
    of sequences, what they are (for messages), and where they come from (for the manifest)."""

    store: str
    spec: str
    what: str
    word_bytes: int
    packed: bool
    #: at most this many tokens a part, for a format written in parts (OLMo); None: its default
    part_tokens: int | None = None


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: documents are training entries, or packs under a plan."""

    format: str
    what: str
    documents: int
    sequences: int
    tokens: int
    bytes: int
    seconds: float
    #: the ids' dtype in the files (a reader of OLMo parts must be told it)
    ids_dtype: str


class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)
_W = TypeVar("_W", bound="TokenWriter")


class TokenWriter(ABC):
    """Writes one format's files into an export folder, a block of whole documents at a time
    (:meth:`write`), then :meth:`finish`; :meth:`into` is the only way in, so that the folder
    is published only when finished and every file is closed whatever happens."""

    #: the name ``--format`` gives it (its key in :mod:`.formats`)
    format: ClassVar[str]
    #: why the format cannot hold a plan's packs, in one line for the user; None: it can
    refuses_packs: ClassVar[str | None] = None
    #: the ids' dtype in its files (the manifest says it: a reader may have to be told)
    ids_dtype: np.dtype
    #: whether its files hold each sequence's ``extra_info`` (a format without it says so once)
    keeps_extra_info: ClassVar[bool] = False

    def __init__(self, folder: Path, shape: Shape) -> None:
        self.folder, self.shape = folder, shape
        #: what :meth:`write` has been given so far; a format may read them (Megatron's document ends)
        self.documents = self.sequences = self.tokens = 0
        self._files: list[Path] = []  # the export's files, whose bytes the summary counts
        self._closing = ExitStack()  # every file opened, closed (and scratch removed) once, in reverse
        self._said_extra_info = False

    @classmethod
    @contextmanager
    def into(cls: type[_W], output: str | os.PathLike[str], shape: Shape) -> Iterator[_W]:
        """A writer into a temporary folder beside ``output`` that is renamed to it when the block
        ends without error (after :meth:`finish`) and removed when it does not; its files are
        closed either way."""
        with publishing(output) as folder:
            writer = cls(folder, shape)
            try:
                yield writer
            finally:
                writer.close()

    @abstractmethod
    def encode(self, words: Words) -> None:
        """Write ``words``, whole documents in export order, to the format's files."""

    def complete(self) -> None:
        """Write what the format writes once every word is in (Megatron's indexes); nothing here."""
        return  # a hook, not abstract: most formats have nothing to add

    def path(self, name: str) -> Path:
        """Where the export's file ``name`` goes, counted in the export's bytes, for a format that
        opens it itself (and then :meth:`keep`\\ s what it opened)."""
        path = self.folder / name
        self._files.append(path)
        return path

    def create(self, name: str) -> BinaryIO:
        """The export's file ``name``, open for writing: counted, and closed by :meth:`close`."""
        return self.keep(open(self.path(name), "wb"))

    def keep(self, file: _C) -> _C:
        """``file``, to be closed by :meth:`close` (on error too); closing it earlier is fine."""
        self._closing.callback(file.close)
        return file

    def spool(self, name: str) -> BinaryIO:
        """A scratch file in the folder to read back before finishing, removed by :meth:`close`:
        never part of the export, nor of its bytes."""
        path = self.folder / name
        self._closing.callback(path.unlink, missing_ok=True)
        return self.keep(open(path, "w+b"))

    def write(self, words: Words) -> None:
        """Encode ``words`` and count them."""
        if words.extra_info is not None and not self.keeps_extra_info and not self._said_extra_info:
            self._said_extra_info = True
            first = words.first + int(np.searchsorted(np.cumsum(words.documents), next(
                number for number, info in enumerate(words.extra_info) if info is not None), side="right"))
            logger.warning("%s: %s %d and others carry extra_info (LLaMA-Factory v1's, a KTO label say), which "
                           "format %s cannot hold: left out of the export; --format parquet keeps it",
                           self.shape.what, "pack" if self.shape.packed else "training entry", first, self.format)
        self.encode(words)
        self.documents += len(words.documents)
        self.sequences += len(words.lengths)
        self.tokens += len(words.ids)

    def finish(self, started: float) -> ExportSummary:
        """Complete and close the files, and write the manifest; ``started`` is when the export
        began (``time.perf_counter()``), for the summary's seconds."""
        self.complete()
        self.close()
        summary = ExportSummary(format=self.format, what=self.shape.what, documents=self.documents,
                                sequences=self.sequences, tokens=self.tokens,
                                bytes=sum(path.stat().st_size for path in self._files),
                                seconds=time.perf_counter() - started, ids_dtype=self.ids_dtype.name)
        self._manifest(summary)
        return summary

    def close(self) -> None:
        """Close every file opened and remove the scratch files; a second call does nothing."""
        self._closing.close()

    def _manifest(self, summary: ExportSummary) -> None:
        """What the folder was made from, and the dtype a reader must be told (OLMo-core's ``dtype=``)."""
        details = {**asdict(summary), "store": self.shape.store, "spec": self.shape.spec,
                   "packed": self.shape.packed, "dataidx_version": __version__}
        details.pop("seconds")
        (self.folder / MANIFEST).write_text(json.dumps(details, indent=2) + "\n", encoding="utf-8")

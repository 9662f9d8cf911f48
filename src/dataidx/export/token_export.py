"""``dataidx export --format``: a spec's stored tokens, for a mixture's training entries or a plan's
packs, in a trainer's own format (Megatron ``.bin/.idx``, OLMo-core numpy parts, Parquet).

Only stored tokens are exported (``dataidx render --store-tokens``): an export reads every entry
once, which rendering on the way would make a tokenizer run, and what is written is then exactly
what DataEngine and PackedDataset serve from the same words. Placements are read a chunk at a
time and words decoded a bounded number of tokens at a time, so memory is constant at any size;
the folder appears under its name only when complete (:mod:`.output`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .._version import __version__
from ..errors import UsageError
from ..progress import CountProgress
from ..store import check_output_folder
from .megatron import MegatronWriter
from .olmo import OlmoWriter
from .output import publishing
from .parquet import ParquetTokenWriter
from .placements import MixtureWords, PlanWords
from .words import decoded

FORMATS = ("megatron", "olmo", "parquet")
#: What every export folder holds besides the format's files: what it was made from.
MANIFEST = "dataidx_export.json"


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


def export_tokens(store: str | os.PathLike[str], output: str | os.PathLike[str], *, format: str,
                  spec: str | None = None, plan: str | None = None, mixture: str | None = None, epoch: int = 0,
                  verify: bool = True, force: bool = False, progress: CountProgress | None = None,
                  part_tokens: int | None = None) -> ExportSummary:
    """Write the stored tokens of spec ``spec`` for epoch ``epoch`` of mixture ``mixture`` (or of
    plan ``plan``'s packs) into folder ``output`` in ``format``. ``part_tokens`` bounds an OLMo part.

    Example::

        export_tokens("demo.db", "megatron/", format="megatron", spec="default")
        export_tokens("demo.db", "packed/", format="parquet", plan="default")
    """
    if format not in FORMATS:
        raise UsageError(f"unknown token export format '{format}' (known: {', '.join(FORMATS)})")
    if plan is None and spec is None:
        raise UsageError("a token export needs --spec (the render spec whose tokens to write) or --plan")
    if plan is not None and format == "olmo":
        raise UsageError("OLMo-core packs documents itself (NumpyPackedFSLDataset): export the mixture's entries, "
                         "without --plan")
    check_output_folder(output, store=store, force=force)
    started = time.perf_counter()
    source = (PlanWords(store, plan, spec=spec, mixture=mixture, epoch=epoch, verify=verify) if plan is not None
              else MixtureWords(store, spec or "", mixture=mixture or "default", epoch=epoch, verify=verify))
    with source, publishing(output) as folder:
        writer = (MegatronWriter(folder, source.tokens.word_bytes) if format == "megatron"
                  else OlmoWriter(folder, source.tokens.word_bytes, source.what, part_tokens) if format == "olmo"
                  else ParquetTokenWriter(folder, source.packed))
        sequences = tokens = 0
        try:
            for chunk in source.chunks():
                for words in decoded(source.tokens, chunk, source.what):
                    writer.write(words)
                    tokens += len(words.ids)
                sequences += len(chunk.tokens)
                if progress is not None:
                    progress(chunk.first + len(chunk.documents), source.documents)
            size = writer.finish()
        finally:
            writer.close()
        summary = ExportSummary(format=format, what=source.what, documents=source.documents, sequences=sequences,
                                tokens=tokens, bytes=size, seconds=time.perf_counter() - started,
                                ids_dtype=writer.ids_dtype.name)
        _manifest(folder, summary, store, source.tokens.spec, plan is not None)
    return summary


def _manifest(folder: Path, summary: ExportSummary, store: str | os.PathLike[str], spec: str, packed: bool) -> None:
    """What the folder was made from, and the dtype a reader must be told (OLMo-core's ``dtype=``)."""
    details = {**asdict(summary), "store": os.fspath(store), "spec": spec, "packed": packed,
               "dataidx_version": __version__}
    details.pop("seconds")
    (folder / MANIFEST).write_text(json.dumps(details, indent=2) + "\n", encoding="utf-8")

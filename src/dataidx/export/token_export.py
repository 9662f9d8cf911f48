"""``dataidx export --format``: a spec's stored tokens, for a mixture's training entries or a plan's
packs, in a trainer's own format (Megatron ``.bin/.idx``, OLMo-core numpy parts, Parquet).

Only stored tokens are exported (``dataidx render --store-tokens``): an export reads every entry
once, which rendering on the way would make a tokenizer run, and what is written is then exactly
what DataEngine and PackedDataset serve from the same words. Placements are read a chunk at a
time and words decoded a bounded number of tokens at a time, so memory is constant at any size;
each format is a :class:`.TokenWriter`, which publishes the folder only when complete.
"""

from __future__ import annotations

import os
import time

from ..errors import UsageError
from ..progress import CountProgress
from ..store import check_output
from .formats import writer_for
from .placements import MixtureWords, PlanWords
from .words import decoded
from .writer import ExportSummary, Shape


def export_tokens(store: str | os.PathLike[str], output: str | os.PathLike[str], *, format: str,
                  spec: str | None = None, plan: str | None = None, mixture: str | None = None, epoch: int = 0,
                  verify: bool = True, force: bool = False, progress: CountProgress | None = None,
                  part_tokens: int | None = None) -> ExportSummary:
    """Write the stored tokens of spec ``spec`` for epoch ``epoch`` of mixture ``mixture`` (or of
    plan ``plan``'s packs) into folder ``output`` in ``format`` (one of ``FORMATS``).
    ``part_tokens`` bounds an OLMo part.

    Example::

        export_tokens("demo.db", "megatron/", format="megatron", spec="default")
        export_tokens("demo.db", "packed/", format="parquet", plan="default")
    """
    writer_class = writer_for(format)
    if plan is None and spec is None:
        raise UsageError("a token export needs --spec (the render spec whose tokens to write) or --plan")
    if plan is not None and writer_class.refuses_packs:
        raise UsageError(writer_class.refuses_packs)
    check_output(output, "folder", store=store, force=force)
    started = time.perf_counter()
    source = (PlanWords(store, plan, spec=spec, mixture=mixture, epoch=epoch, verify=verify) if plan is not None
              else MixtureWords(store, spec or "", mixture=mixture or "default", epoch=epoch, verify=verify))
    shape = Shape(store=os.fspath(store), spec=source.tokens.spec, what=source.what,
                  word_bytes=source.tokens.word_bytes, packed=source.packed, part_tokens=part_tokens)
    with source, writer_class.into(output, shape) as writer:
        for chunk in source.chunks():
            for words in decoded(source.tokens, chunk, source.what):
                writer.write(words)
            if progress is not None:
                progress(chunk.first + len(chunk.documents), source.documents)
        summary = writer.finish(started)
    return summary

"""The sample export (``dataidx export`` without ``--format``; the token export is the ``export``
package): a mixture's converted samples, in mixture order, to JSON lines or Parquet.

Samples are fetched a chunk at a time and written as they come, so memory stays constant
whatever the mixture's size; the output appears under its name only when complete. Parquet
uses one fixed schema, the standard sample's, so every chunk (and ``datasets``) agrees on it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..convert import Sample
from ..errors import UsageError
from ..progress import CountProgress
from .reader import StoreReader

#: Samples fetched (and then written) at a time.
SAMPLES_PER_EXPORT_CHUNK = 1024
#: Chunks between two releases of the source pages read (64k samples: tens of MiB of pages).
_RELEASE_EVERY = 64
#: The files a sample export writes, by suffix.
SUFFIXES = (".jsonl", ".parquet")

_BLOCK = pa.struct([("type", pa.string()), ("value", pa.string())])
_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.list_(_BLOCK)), ("loss_weight", pa.float64())]))
#: The standard sample (SFT or preference) as Arrow: what ``.parquet`` and ``to_hf`` hold.
SAMPLE_SCHEMA = pa.schema([
    ("_dataset_name", pa.string()),
    ("messages", _MESSAGES),
    ("chosen_messages", _MESSAGES),
    ("rejected_messages", _MESSAGES),
    ("tools", pa.string()),
    ("extra_info", pa.string()),  # v1's, as text (the build refuses any other)
    ("text", pa.string()),  # a pretraining document's
])


def samples(reader: StoreReader, chunk: int = SAMPLES_PER_EXPORT_CHUNK) -> Iterator[list[Sample]]:
    """The mixture's samples in position order, ``chunk`` at a time."""
    for start in range(0, len(reader), chunk):
        yield reader.get_many(list(range(start, min(start + chunk, len(reader)))))
        if start // chunk % _RELEASE_EVERY == _RELEASE_EVERY - 1:
            reader.release_rows()


def _checked(batch: list[Sample], start: int) -> list[Sample]:
    """The batch, if every sample fits the standard schema exactly; Arrow would silently drop
    keys it does not know (a message's ``name``), so anything else is an error naming it."""
    for offset, sample in enumerate(batch):
        problem = _misfit(sample)
        if problem:
            raise UsageError(f"position {start + offset}: {problem} that the standard sample does not; "
                               "export to .jsonl to keep it")
    return batch


def _misfit(sample: Mapping[str, Any]) -> str | None:
    extra = set(sample) - set(SAMPLE_SCHEMA.names)
    if extra:
        return f"has keys {', '.join(sorted(extra))}"
    for key in ("tools", "extra_info", "text"):
        if sample.get(key) is not None and not isinstance(sample[key], str):
            return f"has {key} of type {type(sample[key]).__name__}"
    for key in ("messages", "chosen_messages", "rejected_messages"):
        for number, message in enumerate(sample.get(key) or []):
            if not isinstance(message, dict) or set(message) - {"role", "content", "loss_weight"}:
                return (f"{key}[{number}] has keys "
                        f"{', '.join(sorted(set(message) - {'role', 'content', 'loss_weight'}))}")
            for block in message.get("content") or []:
                if (not isinstance(block, dict) or set(block) - {"type", "value"}
                        or not isinstance(block.get("value"), str)):
                    return f"{key}[{number}] has a content block {block!r}"
    return None


def export_mixture(store: str | os.PathLike[str], output: str | os.PathLike[str], *, mixture: str = "default",
                   verify: bool = True, progress: CountProgress | None = None, epoch: int = 0) -> int:
    """The sample export: write epoch ``epoch`` of mixture ``mixture`` of ``store`` to ``output``
    (.jsonl or .parquet); returns samples.

    Example::

        export_mixture("demo.db", "demo.jsonl")
    """
    output = Path(output)
    if output.suffix not in SUFFIXES:
        raise UsageError(f"{output}: unknown export format (by extension: {', '.join(SUFFIXES)})")
    if not output.parent.is_dir():
        raise UsageError(f"{output}: folder {output.parent} does not exist")
    reader = StoreReader(store, mixture, verify=verify, epoch=epoch)
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    written = 0
    try:
        if output.suffix == ".jsonl":
            with temporary.open("w", encoding="utf-8") as file:
                for batch in samples(reader):
                    file.writelines(json.dumps(sample, ensure_ascii=False) + "\n" for sample in batch)
                    written += len(batch)
                    if progress is not None:
                        progress(written, len(reader))
        else:
            import pyarrow.parquet as pq  # here, not at import: only this format needs it

            with pq.ParquetWriter(temporary, SAMPLE_SCHEMA) as writer:
                for batch in samples(reader):
                    writer.write_table(pa.Table.from_pylist(_checked(batch, written), schema=SAMPLE_SCHEMA))
                    written += len(batch)
                    if progress is not None:
                        progress(written, len(reader))
        os.replace(temporary, output)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    finally:
        reader.close()
    return written


def to_hf(reader: StoreReader) -> Any:
    """The mixture as a ``datasets.Dataset`` (written once to the HF cache, standard schema)."""
    import datasets  # here, not at import: a heavy library, and only this needs it

    def generate() -> Iterator[dict[str, Any]]:
        start = 0
        for batch in samples(reader):
            for sample in _checked(batch, start):
                yield {name: sample.get(name) for name in SAMPLE_SCHEMA.names}
            start += len(batch)

    return datasets.Dataset.from_generator(generate, features=datasets.Features.from_arrow_schema(SAMPLE_SCHEMA))

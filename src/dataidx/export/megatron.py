"""Megatron ``.bin/.idx`` datasets, byte for byte what megatron-core's ``IndexedDatasetBuilder``
writes, read by its ``IndexedDataset``.

The format holds one array per token and no labels, so an export is four parallel datasets with
the same sequences and documents: ``<prefix>_text_document`` (ids), ``_labels_document`` (int32,
-100 where not supervised), ``_loss_mask_document`` (uint8, aligned to the ids: FlagScale's SFT
dataset reads a file of that name) and ``_loss_weights_document`` (float32). Tokens go to the
``.bin`` files as they come; sequence lengths and document ends are spooled to a file, and each
``.idx`` is assembled from the spool at the end, in blocks, so memory is a chunk's at any size.
Opening, counting and closing the files is :class:`.TokenWriter`'s.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .words import Words
from .writer import Shape, TokenWriter

#: megatron.core.datasets.indexed_dataset: ``_INDEX_HEADER``, version 1, ``DType`` codes.
MAGIC = b"MMIDIDX\x00\x00"
HEADER = struct.Struct("<9sQBQQ")
CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
         np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7, np.dtype(np.uint16): 8}
PREFIX = "data"
#: Sequences whose pointers one block of the ``.idx`` assembly computes.
_BLOCK = 1 << 20


def datasets(word_bytes: int) -> dict[str, np.dtype]:
    """Each dataset's suffix and dtype; ids in uint16 where the words are 16-bit (Megatron has no
    uint32: int32 otherwise, as ``DType.optimal_dtype`` picks for a large vocabulary)."""
    return {"text": np.dtype(np.uint16 if word_bytes == 2 else np.int32), "labels": np.dtype(np.int32),
            "loss_mask": np.dtype(np.uint8), "loss_weights": np.dtype(np.float32)}


class MegatronWriter(TokenWriter):
    """Writes the four datasets a block at a time; :meth:`complete` writes the indexes."""

    format = "megatron"

    def __init__(self, folder: Path, shape: Shape) -> None:
        super().__init__(folder, shape)
        self.dtypes = datasets(shape.word_bytes)
        self.ids_dtype = self.dtypes["text"]
        self.bins = {name: self.create(f"{PREFIX}_{name}_document.bin") for name in self.dtypes}
        self.lengths = self.spool(".lengths.spool")  # int32 per sequence
        self.ends = self.spool(".documents.spool")  # int64 per document: sequences so far

    def encode(self, words: Words) -> None:
        arrays = {"text": words.ids, "labels": words.labels(), "loss_mask": words.supervised,
                  "loss_weights": words.weights}
        for name, array in arrays.items():
            self.bins[name].write(np.ascontiguousarray(array, dtype=self.dtypes[name]).tobytes())
        self.lengths.write(words.lengths.astype("<i4").tobytes())
        self.ends.write((self.sequences + np.cumsum(words.documents)).astype("<i8").tobytes())

    def complete(self) -> None:
        """Write every ``.idx`` from the spooled lengths and document ends."""
        for file in self.bins.values():
            file.close()
        for name, dtype in self.dtypes.items():
            with self.create(f"{PREFIX}_{name}_document.idx") as index:
                index.write(HEADER.pack(MAGIC, 1, CODES[dtype], self.sequences, self.documents + 1))
                _copy(self.lengths, index)
                self._pointers(index, dtype.itemsize)
                index.write(np.zeros(1, dtype="<i8").tobytes())
                _copy(self.ends, index)

    def _pointers(self, index: BinaryIO, itemsize: int) -> None:
        """Byte offset of each sequence in the ``.bin``, from the spooled lengths, a block at a time."""
        self.lengths.seek(0)
        at = 0
        while block := self.lengths.read(_BLOCK * 4):
            lengths = np.frombuffer(block, dtype="<i4").astype(np.int64) * itemsize
            pointers = np.cumsum(lengths) - lengths + at
            index.write(pointers.astype("<i8").tobytes())
            at += int(lengths.sum())


def _copy(source: BinaryIO, target: BinaryIO) -> None:
    source.seek(0)
    while block := source.read(1 << 24):
        target.write(block)

"""OLMo-core numpy token parts, as open-instruct's ``convert_sft_data_for_olmocore.py`` writes
them and ``NumpyPackedFSLDatasetConfig`` (olmo_core.data) reads them.

Per part: ``token_ids_part_XXXX.npy`` (ids, a raw array with no npy header despite the name),
``labels_mask_part_XXXX.npy`` (one bool per token, aligned to the ids: ``labels != -100``) and
``token_ids_part_XXXX.csv.gz`` (one ``start,end`` line per document, relative to the part),
which OLMo-core reads for boundaries with ``use_array_if_local=False`` instead of scanning for
EOS (which merges an entry truncated before its EOS into the next). Unlike open-instruct, a part
ends before a document that would cross it (a longer document is a part alone), so every part
holds whole entries. The label mask is boolean: weights other than 1/0 are refused, not dropped.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import UsageError
from .words import Words
from .writer import Shape, TokenWriter

#: Token bytes per part: open-instruct's ``max_size_gb=1``.
PART_BYTES = 1 << 30


def token_dtype(word_bytes: int) -> np.dtype:
    """The ids' dtype, which the reader must be given (``dtype=``): the smallest unsigned type
    the words' ids fit, as open-instruct picks from the vocabulary."""
    return np.dtype(np.uint16 if word_bytes == 2 else np.uint32)


class OlmoWriter(TokenWriter):
    """Writes parts of at most ``shape.part_tokens`` tokens (unless one entry is longer)."""

    format = "olmo"
    refuses_packs = ("OLMo-core packs documents itself (NumpyPackedFSLDataset): export the mixture's entries, "
                     "without --plan")

    def __init__(self, folder: Path, shape: Shape) -> None:
        super().__init__(folder, shape)
        self.ids_dtype = token_dtype(shape.word_bytes)
        self.part_tokens = shape.part_tokens or PART_BYTES // self.ids_dtype.itemsize
        self.part = -1
        self.used = 0
        self.files: tuple[BinaryIO, BinaryIO, gzip.GzipFile] | None = None

    def encode(self, words: Words) -> None:
        if words.weighted is not None:
            raise UsageError(f"{self.shape.what}: training entry {words.weighted} has loss weights other than 1 "
                             "where supervised and 0 elsewhere, and OLMo-core's label mask is boolean: export it "
                             "with --format megatron or parquet, which carry the weights")
        lengths = words.document_lengths()
        ends = np.cumsum(lengths)
        done = 0  # documents written
        while done < len(lengths):
            before = int(ends[done - 1]) if done else 0
            fits = max(done, int(np.searchsorted(ends, before + self.part_tokens - self.used, side="right")))
            if fits == done:  # the next document does not fit what is left of this part
                if self.used:
                    self._next_part()
                    continue
                fits = done + 1  # longer than a part: a part of its own
            if self.files is None:
                self._next_part()
            self._append(words, before, int(ends[fits - 1]), lengths[done:fits])
            done = fits

    def _append(self, words: Words, start: int, stop: int, lengths: np.ndarray) -> None:
        assert self.files is not None
        tokens, mask, boundaries = self.files
        tokens.write(np.ascontiguousarray(words.ids[start:stop], dtype=self.ids_dtype).tobytes())
        mask.write(np.ascontiguousarray(words.supervised[start:stop], dtype=np.bool_).tobytes())
        ends = self.used + np.cumsum(lengths)
        boundaries.write("".join(f"{a},{b}\n" for a, b in zip((ends - lengths).tolist(), ends.tolist())).encode())
        self.used = int(ends[-1])

    def _next_part(self) -> None:
        """Close the part being written (the base closes the last) and open the next."""
        for file in self.files or ():
            file.close()
        self.part += 1
        self.used = 0
        name = f"{self.part:04d}"
        self.files = (self.create(f"token_ids_part_{name}.npy"), self.create(f"labels_mask_part_{name}.npy"),
                      self.keep(gzip.open(self.path(f"token_ids_part_{name}.csv.gz"), "wb")))

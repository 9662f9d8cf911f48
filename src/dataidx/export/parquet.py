"""Token Parquet: a row per training entry (``input_ids``, ``labels``, ``loss_weights``), or under
a plan a row per pack in Megatron-Bridge's packed SFT layout, which its
``GPTSFTPackedParquetDataset`` (megatron/bridge/data/packing/parquet.py) reads.

A pack's row has ``input_ids`` (its sequences end to end), ``seq_start_id`` (where each sequence
starts, 0 first, the end left out) and ``loss_mask`` (int8, already rolled by one as
``fill_packing_strategy`` rolls it: 1 at ``t`` when token ``t + 1`` of the same sequence is
supervised, 0 at each sequence's last token), plus our unrolled ``labels`` and ``loss_weights``,
which Bridge ignores (it reads its three columns by name). ``extra_info`` is LLaMA-Factory v1's
(a KTO label, say): an entry's text, null where it has none; a pack's list of its sequences'.
Columns are built from flat NumPy arrays and offsets, a chunk at a time: no Python list per
entry (but for ``extra_info``, where some entry has one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .words import Words
from .writer import Shape, TokenWriter

#: Rows per row group: Megatron-Bridge's ``write_packed_parquet`` default (its reader caches one).
ROW_GROUP = 500
ENTRIES = "data.parquet"
PACKS = "data.idx.parquet"


def schema(packed: bool) -> pa.Schema:
    ints, floats = pa.list_(pa.int32()), pa.list_(pa.float32())
    fields = [("input_ids", ints), ("labels", ints), ("loss_weights", floats),
              ("extra_info", pa.list_(pa.string()) if packed else pa.string())]
    if packed:
        fields[1:1] = [("seq_start_id", ints), ("loss_mask", pa.list_(pa.int8()))]
    return pa.schema(fields)


def _lists(offsets: np.ndarray, values: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, type=kind))


class ParquetTokenWriter(TokenWriter):
    """Writes one Parquet file a block at a time, a row per document."""

    format = "parquet"
    ids_dtype = np.dtype(np.int32)
    keeps_extra_info = True

    def __init__(self, folder: Path, shape: Shape) -> None:
        super().__init__(folder, shape)
        self.packed = shape.packed
        self.writer = self.keep(pq.ParquetWriter(self.path(PACKS if self.packed else ENTRIES), schema(self.packed)))

    def encode(self, words: Words) -> None:
        sizes = words.document_lengths()
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        columns = {"input_ids": _lists(offsets, words.ids.astype(np.int32), pa.int32()),
                   "labels": _lists(offsets, words.labels(), pa.int32()),
                   "loss_weights": _lists(offsets, words.weights, pa.float32()),
                   "extra_info": self._extra_info(words)}
        if self.packed:
            ends = np.cumsum(words.lengths)
            starts = ends - words.lengths
            sequences = np.concatenate(([0], np.cumsum(words.documents)))
            pack_of = np.repeat(np.arange(len(words.documents)), words.documents)
            columns["seq_start_id"] = _lists(sequences, starts - offsets[pack_of], pa.int32())
            mask = np.zeros(len(words.supervised), dtype=np.int8)
            mask[:-1] = words.supervised[1:]
            mask[ends - 1] = 0
            columns["loss_mask"] = _lists(offsets, mask, pa.int8())
        self.writer.write_table(pa.table(columns, schema=schema(self.packed)), row_group_size=ROW_GROUP)

    def _extra_info(self, words: Words) -> pa.Array:
        """Each entry's ``extra_info`` (a pack's: its sequences'), null where there is none."""
        documents = len(words.documents)
        if not self.packed:
            return pa.array(words.extra_info, type=pa.string()) if words.extra_info is not None else pa.nulls(
                documents, pa.string())
        values = words.extra_info if words.extra_info is not None else [None] * len(words.lengths)
        sequences = np.concatenate(([0], np.cumsum(words.documents)))
        return pa.ListArray.from_arrays(pa.array(sequences.astype(np.int32)), pa.array(values, type=pa.string()))

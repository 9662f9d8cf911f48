"""A mixture's positions: written as they are drawn (runs of consecutive base entries, the rest
one row a position), and read back as one array of base entry ids.

Packing, the rendered engine and token budgets need, for every position, the entry behind it:
runs expand by arithmetic and only explicit positions are read, so a 1.9M-position mixture costs
one small query, not a row object per position. NumPy and SQLAlchemy are imported here, which
:class:`.records.Mixtures` imports only when it writes or reads positions.
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import Connection, text

from ...errors import StoreError
from ..handle import StoreHandle
from ..sqlite import bulk  # its chunk size read at each call, so that tests can make it small
from ..sqlite.working_copy import WorkingCopy
from .epochs import StoredMixture

#: Rows fetched at a time when reading scattered positions.
_ROWS_PER_FETCH = 1 << 16

_MIXTURE = text(
    "INSERT INTO mixture_entries (id, mixture_id, entry_id) SELECT :first + key, :mixture, value FROM json_each(:ids)"
)
_MIXTURE_RUN = text(
    "INSERT INTO mixture_runs (mixture_id, start, first_entry, length) VALUES (:mixture, :start, :first, :length)"
)
#: Runs of consecutive entries at least this long are stored as one mixture_runs row.
MIN_RUN = 64


class PositionWriter:
    """Writes a mixture's positions as they come, a chunk of entry ids or a run at a time.

    A whole dataset, or a whole repeat of one, is a run of consecutive entry ids: a stretch of
    consecutive ids at least ``min_run`` long is stored as one ``mixture_runs`` row, the
    scattered rest as one ``mixture_entries`` row per position. Stretches are found across
    chunk boundaries, so the rows are the same however the ids are chunked; memory holds one
    chunk, never the whole mixture.
    """

    def __init__(self, connection: Connection, mixture_id: int, first_id: int, *, min_run: int = MIN_RUN) -> None:
        self.connection, self.mixture_id, self.min_run = connection, mixture_id, min_run
        self.position = first_id  # the position of the first id not yet classified
        self.stretch: tuple[int, int] | None = None  # (first entry id, length): may go on in the next chunk
        self.scattered: list[np.ndarray] = []  # ids at positions after those written, before the stretch
        self.scattered_count = 0

    def add_run(self, first_entry: int, length: int) -> None:
        """Entry ids ``first_entry .. first_entry + length - 1``, in order."""
        if length:
            self._extend(first_entry, length)

    def add_ids(self, ids: np.ndarray) -> None:
        """Entry ids in order, any pattern."""
        if not len(ids):
            return
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        starts = np.concatenate([[0], breaks])
        lengths = np.diff(np.concatenate([starts, [len(ids)]]))
        self._extend(int(ids[0]), int(lengths[0]))
        if len(starts) == 1:
            return
        # The stretches between the first and the last: each long one a run, the rest scattered.
        self._close_stretch()
        middle = slice(1, len(starts) - 1)
        done = int(starts[1])
        for start, length in zip(starts[middle][lengths[middle] >= self.min_run].tolist(),
                                 lengths[middle][lengths[middle] >= self.min_run].tolist()):
            self._scatter(ids[done:start])
            self._run(int(ids[start]), length)
            done = start + length
        self._scatter(ids[done : starts[-1]])
        self.stretch = (int(ids[starts[-1]]), int(lengths[-1]))

    def close(self) -> None:
        self._close_stretch()
        self._flush()

    def _extend(self, first_entry: int, length: int) -> None:
        if self.stretch is not None and sum(self.stretch) == first_entry:
            self.stretch = (self.stretch[0], self.stretch[1] + length)
            return
        self._close_stretch()
        self.stretch = (first_entry, length)

    def _close_stretch(self) -> None:
        if self.stretch is None:
            return
        first, length = self.stretch
        self.stretch = None
        if length >= self.min_run:
            self._run(first, length)
        else:
            self._scatter(np.arange(first, first + length, dtype=np.int64))

    def _run(self, first_entry: int, length: int) -> None:
        self._flush()
        self.connection.execute(_MIXTURE_RUN, {"mixture": self.mixture_id, "start": self.position,
                                               "first": first_entry, "length": length})
        self.position += length

    def _scatter(self, ids: np.ndarray) -> None:
        if len(ids):
            self.scattered.append(ids)
            self.scattered_count += len(ids)
            if self.scattered_count >= bulk.ROWS_PER_STATEMENT:
                self._flush()

    def _flush(self) -> None:
        if self.scattered:
            _send(self.connection, self.mixture_id, self.position, np.concatenate(self.scattered))
            self.position += self.scattered_count
            self.scattered, self.scattered_count = [], 0


def _send(connection: Connection, mixture_id: int, first_id: int, ids: np.ndarray) -> None:
    for offset in range(0, len(ids), bulk.ROWS_PER_STATEMENT):
        chunk = ids[offset : offset + bulk.ROWS_PER_STATEMENT].tolist()
        connection.execute(_MIXTURE, {"first": first_id + offset, "mixture": mixture_id, "ids": json.dumps(chunk)})


def position_entries(handle: StoreHandle | WorkingCopy, mixture: StoredMixture) -> np.ndarray:
    """Base entry id of every position of ``mixture`` (of the epoch it was read for), in position
    order (4-byte ids while they fit)."""
    last = handle.value("SELECT max(id) FROM base_entries") or 0
    entries = np.zeros(mixture.positions, dtype=np.int32 if last < 2**31 else np.int64)
    filled = np.zeros(mixture.positions, dtype=bool)
    runs = handle.all("SELECT start, first_entry, length FROM mixture_runs WHERE mixture_id = {mark} "
                      "AND start BETWEEN {mark} AND {mark}",
                      mixture.id, mixture.start, mixture.start + mixture.positions - 1)
    for start, first_entry, length in runs:
        offset = start - mixture.start
        entries[offset : offset + length] = np.arange(first_entry, first_entry + length, dtype=entries.dtype)
        filled[offset : offset + length] = True
    explicit = handle.execute("SELECT id, entry_id FROM mixture_entries WHERE id BETWEEN {mark} AND {mark}",
                              mixture.start, mixture.start + mixture.positions - 1)
    while found := explicit.fetchmany(_ROWS_PER_FETCH):  # a row tuple per position only a batch at a time
        pairs = np.asarray(found, dtype=np.int64)
        entries[pairs[:, 0] - mixture.start] = pairs[:, 1]
        filled[pairs[:, 0] - mixture.start] = True
    if not filled.all():
        raise StoreError(f"mixture '{mixture.name}' is missing positions; the store is damaged")
    return entries

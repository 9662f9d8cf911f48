"""The rows a render writes per base entry, as plain tuples (what ``dataidx render``'s workers
return and :mod:`.writes` inserts), and a spec's lengths as arrays: reachable as
``Specs.LengthRow``, ``Specs.StoredRow`` and ``Specs.Lengths``, without loading NumPy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import numpy as np

#: One base entry under a spec: ``(entry_id, tokens, supervised_tokens, full_tokens, status, detail,
#: cause, reasoning)``.
LengthRow: TypeAlias = tuple[int, int, int, int, str, "str | None", "str | None", "str | None"]
#: A :data:`LengthRow` and where the entry's words lie when tokens are stored: ``token_offset``,
#: ``side_tokens``, ``token_weights``, ``extra_info`` (all None without tokens; see :mod:`.token_files`).
StoredRow: TypeAlias = tuple[int, int, int, int, str, "str | None", "str | None", "str | None", "int | None",
                             "int | None", "bytes | None", "str | None"]


def split_plain(rows: list[StoredRow], *prefix: object) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """``rows`` (each after ``prefix``) as two lists: the plain rows' lengths, status and token
    offset (their every other column NULL: most rows), and the other rows whole. Bound without
    those NULLs, plain rows insert almost 3 times as fast (1.17M against 0.41M rows/s: sqlite3
    binds each parameter)."""
    plain = [(*prefix, *row[:5], row[8]) for row in rows if _plain(row)]
    full = [(*prefix, *row) for row in rows if not _plain(row)]
    return plain, full


def _plain(row: StoredRow) -> bool:
    return row[5] is None and row[6] is None and row[7] is None and row[9] is None and row[10] is None and \
        row[11] is None


@dataclass(frozen=True)
class SpecLengths:
    """Token counts and "trains" flags of one spec, indexed by ``entry_id - first``."""

    first: int
    tokens: np.ndarray
    trains: np.ndarray

    def of(self, entry_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.tokens[entry_ids - self.first], self.trains[entry_ids - self.first]


@dataclass(frozen=True)
class PartFile:
    """One part of a sharded render as a merge inserts it (:mod:`.part_rows`): its rows file, its
    base entries, and where its words start in the spec's token file (``base``, added to every
    ``token_offset``; ``words``: how many the part holds)."""

    path: Path
    first: int
    last: int
    base: int = 0
    words: int = 0

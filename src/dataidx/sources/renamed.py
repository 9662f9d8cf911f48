"""A dataset's rows under a ``columns`` map: source column names become the converter's.

Applied to rows and tables alike, so the vectorised and the row-by-row cut paths, and every
reader, see the same names.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from ..errors import SourceError
from .rows import BadRow, RowChunk, RowSource


class RenamedRows:
    """A row source seen through a dataset's ``columns`` map: source column names become the
    names its converter expects, in rows and tables alike (so both cut paths agree)."""

    def __init__(self, rows: RowSource, columns: dict[str, str], dataset: str) -> None:
        self.rows = rows
        self.rename = {source: target for target, source in columns.items()}
        present = rows.column_names
        missing = [source for source in self.rename if source not in present]
        if missing:
            raise SourceError(
                f"dataset '{dataset}': key 'columns': source column(s) {', '.join(map(repr, missing))} not found "
                f"(columns: {', '.join(present)})"
            )

    def __len__(self) -> int:
        return len(self.rows)

    def _renamed(self, row: dict[str, Any]) -> dict[str, Any]:
        renamed = {key: value for key, value in row.items() if key not in self.rename.values()}
        renamed.update((self.rename[key], value) for key, value in row.items() if key in self.rename)
        return renamed

    def row(self, index: int) -> dict[str, Any]:
        return self._renamed(self.rows.row(index))

    def iter_rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for row in self.rows.iter_rows():
            yield row if isinstance(row, BadRow) else self._renamed(row)

    def chunks(self, rows: int, nbytes: int) -> Iterator[RowChunk]:
        for chunk in self.rows.chunks(rows, nbytes):
            yield RowChunk(chunk.first, chunk.length, self._renamed_table(chunk.table),
                           lambda rows=chunk.rows: (r if isinstance(r, BadRow) else self._renamed(r) for r in rows()))

    def take(self, indices: Sequence[int]) -> pa.Table | None:
        return self._renamed_table(self.rows.take(indices))

    def release(self) -> None:
        self.rows.release()

    def _renamed_table(self, table: pa.Table | None) -> pa.Table | None:
        if table is None:
            return None
        # A renamed column replaces any unrenamed one already holding the target name.
        kept = [name for name in table.column_names if name not in self.rename.values() or name in self.rename]
        selected = table.select(kept)
        return selected.rename_columns([self.rename.get(name, name) for name in selected.column_names])

    @property
    def column_names(self) -> list[str]:
        names = [name for name in self.rows.column_names if name not in self.rename.values() or name in self.rename]
        return [self.rename.get(name, name) for name in names]

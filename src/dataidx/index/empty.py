"""A dataset that trains nothing is a mistake: the wrong converter, or none, for its rows.

v1 keeps a row without a supervised turn as one entry, and so does dataidx; but when (almost)
every row of a dataset is such a row, the converter does not fit the data (alpaca rows read as
sharegpt give ``messages: []``; sharegpt rows with no converter stay raw), and a training run
would learn nothing from it. The build stops, naming the converter the columns suggest.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SourceError
from ..spec import EMPTY_SHARE, DatasetSpec

#: Columns that give a row's format away, and the converter that reads it.
_SUGGESTIONS = (
    (("instruction", "output"), "alpaca"),
    (("conversations",), "sharegpt"),
    (("chosen", "rejected"), "pair"),
    (("messages",), "openai"),
)


def suggested_converter(columns: Sequence[str]) -> str | None:
    """The converter whose columns a dataset has (``instruction``/``output`` -> alpaca...), or None."""
    for needed, converter in _SUGGESTIONS:
        if all(column in columns for column in needed):
            return converter
    return None


def refuse_empty(dataset: DatasetSpec, *, converter: str, rows: int, empty: int, columns: Sequence[str]) -> None:
    """A SourceError when at least :data:`EMPTY_SHARE` of the ``rows`` of ``dataset`` train nothing,
    unless the dataset allows it (``allow_empty: true``)."""
    if dataset.allow_empty or rows == 0 or empty < rows * EMPTY_SHARE:
        return
    suggested = suggested_converter(columns)
    found = ", ".join(columns[:12]) + (", ..." if len(columns) > 12 else "") if columns else "none"
    if suggested is not None and suggested != converter:
        hint = f"its columns ({found}) suggest converter: {suggested}"
    else:
        hint = f"its columns are {found}"
    under = "with no converter" if dataset.converter is None else f"under converter '{converter}'"
    raise SourceError(f"dataset '{dataset.name}': {empty} of {rows} rows have no supervised turn and no preference "
                      f"pair {under}; {hint}; if that is on purpose, set allow_empty: true (pretraining text is "
                      "converter: text)")

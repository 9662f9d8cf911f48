"""The positions a report is about: every figure counts positions (a repeated entry as often as
it is drawn), over every epoch of the mixture or over the one ``--epoch`` names. The SQL over
them joins a mixture's runs to base entries, datasets and a spec's lengths, so it is the store's
(:class:`dataidx.store.PositionFigures`); the report says which positions."""

from __future__ import annotations

from dataclasses import dataclass

from ..store import PositionFigures, StoreHandle


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The positions a report is about: mixture ``mixture_id``, epochs ``first..last``;
    ``epoch`` is the one ``--epoch`` chose (None: every epoch)."""

    mixture_id: int
    first: int
    last: int
    epoch: int | None

    def figures(self, handle: StoreHandle) -> PositionFigures:
        """The store's reads over these positions, through ``handle``."""
        return PositionFigures(handle, self.mixture_id, self.first, self.last)

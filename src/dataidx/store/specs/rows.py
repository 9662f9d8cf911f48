"""The rows a render writes per base entry, as plain tuples (what ``dataidx render``'s workers
return and :mod:`.writes` inserts), and a spec's lengths as arrays: reachable as
``Specs.LengthRow``, ``Specs.StoredRow`` and ``Specs.Lengths``, without loading NumPy."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class SpecLengths:
    """Token counts and "trains" flags of one spec, indexed by ``entry_id - first``."""

    first: int
    tokens: np.ndarray
    trains: np.ndarray

    def of(self, entry_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.tokens[entry_ids - self.first], self.trains[entry_ids - self.first]

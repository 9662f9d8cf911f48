"""The rows a render writes per base entry, as plain tuples: what ``dataidx render``'s workers
return and :mod:`.writes` inserts (reachable as ``Specs.LengthRow`` and ``Specs.StoredRow``)."""

from __future__ import annotations

from typing import TypeAlias

#: One base entry under a spec: ``(entry_id, tokens, supervised_tokens, full_tokens, status, detail,
#: cause, reasoning)``.
LengthRow: TypeAlias = tuple[int, int, int, int, str, "str | None", "str | None", "str | None"]
#: A :data:`LengthRow` and where the entry's words lie when tokens are stored: ``token_offset``,
#: ``side_tokens``, ``token_weights`` (all None without tokens; see :mod:`.token_files`).
StoredRow: TypeAlias = tuple[int, int, int, int, str, "str | None", "str | None", "str | None", "int | None",
                             "int | None", "bytes | None"]

"""Serving a spec from its stored tokens: no tokenizer, template or transformers in the process.

A reader opens the spec's token file when the store records one (checked against the record:
one line if it is missing, truncated or another rendering's), and then a fetch is one SQL read
of where the entries' words lie and one slice of the mapped file per entry
(:func:`.tokens.served`). A spec without stored tokens is rendered on fetch, as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import StoreError, UsageError
from ..store import StoredDataset, StoreHandle, read_token_file
from .spec import StoredSpec
from .token_file import TokenFile
from .tokens import TokenRow, served

#: Where the words of entries lie, by base entry id (``(one, many)``): ``(key, dataset_id, offset,
#: tokens, side tokens, weights)``, the spec's id the first parameter.
BY_ENTRY = (
    "SELECT {stamped}r.entry_id, b.dataset_id, r.token_offset, r.tokens, r.side_tokens, r.token_weights "
    "FROM entry_renders AS r JOIN base_entries AS b ON b.id = r.entry_id "
    "WHERE r.spec_id = {mark} AND r.entry_id = {mark}",
    "SELECT {stamped}r.entry_id, b.dataset_id, r.token_offset, r.tokens, r.side_tokens, r.token_weights "
    "FROM entry_renders AS r JOIN base_entries AS b ON b.id = r.entry_id "
    "WHERE r.spec_id = {mark} AND r.entry_id IN ({ids})",
)
#: The same by ``mixture_entries`` rowid, for positions outside a run.
BY_POSITION = (
    "SELECT {stamped}me.id, b.dataset_id, r.token_offset, r.tokens, r.side_tokens, r.token_weights "
    "FROM mixture_entries AS me JOIN base_entries AS b ON b.id = me.entry_id "
    "JOIN entry_renders AS r ON r.spec_id = {mark} AND r.entry_id = me.entry_id WHERE me.id = {mark}",
    "SELECT {stamped}me.id, b.dataset_id, r.token_offset, r.tokens, r.side_tokens, r.token_weights "
    "FROM mixture_entries AS me JOIN base_entries AS b ON b.id = me.entry_id "
    "JOIN entry_renders AS r ON r.spec_id = {mark} AND r.entry_id = me.entry_id WHERE me.id IN ({ids})",
)


def open_tokens(handle: StoreHandle, store: str | os.PathLike[str], spec: StoredSpec,
                tokenizer: Any = None, *, required: bool = False) -> TokenFile | None:
    """The spec's token file, checked, or None when its tokens are not stored (``required``: a
    UsageError saying how to store them). A tokenizer given anyway must be the spec's (it is
    checked, not loaded: serving tokens needs none)."""
    record = read_token_file(handle, spec.id)
    if record is None:
        if required:
            raise UsageError(f"{store}: render spec '{spec.name}' has no stored tokens; store them with dataidx render "
                             f"{store} --tokenizer {spec.tokenizer_path} --cutoff {spec.cutoff} --truncation "
                             f"{spec.truncation} --name {spec.name} --store-tokens (and the --template it was "
                             "rendered with)")
        return None
    spec.check()
    if tokenizer is not None:
        spec.check_tokenizer(tokenizer)
    return TokenFile(record.path(store), spec=spec.name, fingerprint=spec.fingerprint, word_bytes=record.word_bytes,
                     words=record.tokens)


def served_from_tokens(tokens: TokenFile, rows: Sequence[tuple[Any, ...]],
                       datasets: Mapping[int, StoredDataset], store: str) -> list[dict[str, Any]]:
    """The served dicts of ``rows`` (``(dataset_id, offset, tokens, side tokens, weights)``), in order."""
    placed: list[TokenRow] = []
    for _, offset, count, side, weights in rows:
        if offset is None:
            raise StoreError(f"{store}: an entry of spec '{tokens.spec}' trains but has no stored tokens; the store "
                             "is damaged: run dataidx render --store-tokens again")
        placed.append((offset, count, side, weights))
    dicts = served(tokens.words_array, placed)
    return [{"_dataset_name": datasets[row[0]].name, **one} for row, one in zip(rows, dicts)]

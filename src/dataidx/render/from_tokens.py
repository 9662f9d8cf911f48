"""Serving a spec from its stored tokens: no tokenizer, template or transformers in the process.

A reader opens the spec's token file when the store records one (checked against the record:
one line if it is missing, truncated or another rendering's). A fetch then finds each entry's
words through the file's own index, with no SQL: only a position outside a mixture's runs, or
an entry whose index start is flagged (a preference pair's split, unusual loss weights, an
``extra_info``), is looked up in the store. A spec without stored tokens is rendered on fetch, as before.
"""

from __future__ import annotations

import bisect
import json
import os
from typing import Any

import numpy as np

from ..errors import StaleStoreError, UsageError
from ..store import Datasets, Specs, StoreHandle
from .spec import StoredSpec
from .token_file import START, TokenFile
from .tokens import TokenRow, served

#: A flagged entry's extras: ``(entry id, side tokens, token weights, extra info)``.
_EXTRAS = Specs.FETCH_EXTRAS
_START = int(START)


def open_tokens(handle: StoreHandle, store: str | os.PathLike[str], spec: StoredSpec,
                tokenizer: Any = None, *, required: bool = False) -> TokenFile | None:
    """The spec's token file, checked, or None when its tokens are not stored (``required``: a
    UsageError saying how to store them). A tokenizer given anyway must be the spec's (it is
    checked, not loaded: serving tokens needs none)."""
    record = Specs(handle).token_file(spec.id)
    if record is None:
        if required:
            raise UsageError(f"{store}: render spec '{spec.name}' has no stored tokens; store them with "
                             f"{spec.render_command(store, spec.tokenizer_path)} --store-tokens (and the --template it "
                             "was rendered with)")
        return None
    spec.check()
    if tokenizer is not None:
        spec.check_tokenizer(tokenizer)
    return TokenFile(record.path(store), spec=spec.name, fingerprint=spec.fingerprint, word_bytes=record.word_bytes,
                     words=record.tokens)


class TokenServer:
    """Base entries -> their served dicts, from a spec's token file.

    ``fetch`` runs a read template in the reader's process (``EntryReader.fetch``): used only for
    flagged entries. Example::

        server = TokenServer(tokens, spec_id, datasets, "demo.db")
        server.get([17, 3], reader.fetch)
    """

    def __init__(self, tokens: TokenFile, spec_id: int, datasets: dict[int, Datasets.Stored], store: str) -> None:
        self.tokens, self.spec_id, self.store = tokens, spec_id, store
        # an entry's dataset is the last to start at or before it (one without entries starts where the next does)
        starts = sorted((dataset.first_entry, dataset.id, dataset.name) for dataset in datasets.values())
        self._dataset_starts = [first for first, _, _ in starts]
        self._dataset_names = [name for _, _, name in starts]

    def one(self, entry_id: int, fetch: Any) -> dict[str, Any]:
        """The served dict of one base entry (``get`` of one, without its lists: a fetch's whole cost
        is a few microseconds, and each step of the general path is one of them)."""
        tokens = self.tokens
        _, words, index = tokens.mapped()
        at = entry_id - tokens.first_entry
        if not 0 <= at < tokens.entries:
            raise self._not_in_file()
        start, end = int(index[at]), int(index[at + 1]) & _START
        flagged, start = start > _START, start & _START
        if not start < end <= words.size:  # a served entry has words, all within the file
            raise tokens.damaged(entry_id, start, end)
        side_tokens, weights, info = self._extras([entry_id], fetch)[entry_id] if flagged else (None, None, None)
        name = self._dataset_names[bisect.bisect_right(self._dataset_starts, entry_id) - 1]
        return served(words, [(start, end - start, side_tokens, weights, info)], [name])[0]

    def get(self, entry_ids: list[int], fetch: Any) -> list[dict[str, Any]]:
        """The served dicts of base entries ``entry_ids`` (each must train under the spec), in order."""
        _, words, index = self.tokens.mapped()
        where = np.asarray(entry_ids, dtype=np.int64) - self.tokens.first_entry
        if where.size and (where.min() < 0 or where.max() >= self.tokens.entries):
            raise self._not_in_file()
        found = index[where]
        begins, ends = (found & START).astype(np.int64), (index[where + 1] & START).astype(np.int64)
        outside = (ends <= begins) | (ends > words.size)  # a served entry has words, all within the file
        if outside.any():
            k = int(np.argmax(outside))
            raise self.tokens.damaged(entry_ids[k], int(begins[k]), int(ends[k]))
        starts, counts = begins.tolist(), (ends - begins).tolist()
        flagged = np.flatnonzero(found & ~START).tolist()
        extras = self._extras([entry_ids[k] for k in flagged], fetch)
        rows: list[TokenRow] = [(start, count, *extras.get(entry_id, (None, None, None)))
                                for entry_id, start, count in zip(entry_ids, starts, counts)]
        names, firsts = self._dataset_names, self._dataset_starts
        return served(words, rows, [names[bisect.bisect_right(firsts, entry_id) - 1] for entry_id in entry_ids])

    def _not_in_file(self) -> StaleStoreError:
        return StaleStoreError(f"{self.store}: an entry is not in the token file of spec '{self.tokens.spec}'; run "
                               "dataidx render --store-tokens again")

    def _extras(self, entry_ids: list[int], fetch: Any) -> dict[int, tuple[int | None, bytes | None, str | None]]:
        if not entry_ids:
            return {}
        found = {entry_id: (side, weights, info)
                 for entry_id, side, weights, info in fetch(_EXTRAS, self.spec_id, json.dumps(sorted(set(entry_ids))))}
        if len(found) < len(set(entry_ids)):
            raise StaleStoreError(f"{self.store}: entries of spec '{self.tokens.spec}' are missing; the store is "
                                  "damaged")
        return found

"""sha256 of files, read in blocks: what a store records of a spec's token file, a part's manifest of
its files, a spec's fingerprint of a tokenizer's files."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

#: Bytes read at a time: a few MB keeps the hashing, not the calls, the cost.
_BLOCK = 1 << 22


def sha256_of(file: BinaryIO) -> str:
    """The sha256 of ``file`` from where it stands to its end."""
    digest = hashlib.sha256()
    while block := file.read(_BLOCK):
        digest.update(block)
    return digest.hexdigest()

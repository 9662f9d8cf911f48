"""What a reader or a long write depends on, so that only a change to it stops them.

Every write replaces the whole store (a file renamed into place, a schema swapped), so the
store's stamp changes with any write, also one that adds an unrelated mixture. A training run
reads the base index and one mixture (and a spec, a plan); a render reads the base index; a
pack reads a mixture and a spec. :class:`ReadIdentity` holds a digest of each of those parts; a
new stamp is accepted when the parts read are the same, and refused naming the part that is not.

Each part is what its rows say, ids included: a mixture removed and drawn again under its name
has another id or seed or config, a spec rendered again another fingerprint or time, a rebuilt
store another build row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from .dialect import Reads

_PARTS = {
    "build": ("SELECT b.id, b.created_at, b.config_sha256, b.seconds, d.id, d.name, d.first_entry, d.entries "
              "FROM builds AS b CROSS JOIN datasets AS d ORDER BY b.id, d.id"),
    "mixture": ("SELECT id, name, seed, sampling, start, entries, epochs, config_sha256, created_at "
                "FROM mixtures WHERE name = {mark}"),
    "spec": "SELECT id, name, fingerprint, cutoff, entries, kept, created_at FROM render_specs WHERE name = {mark}",
    "plan": ("SELECT id, name, spec_id, mixture_id, capacity, seed, packs, entries, tokens, epochs, created_at "
             "FROM packing_plans WHERE name = {mark}"),
}
_SAID = {"build": "the store was rebuilt", "mixture": "mixture '{}' was removed or drawn again",
         "spec": "render spec '{}' was removed or rendered again",
         "plan": "packing plan '{}' was removed or made again"}


@dataclass(frozen=True)
class ReadIdentity:
    """Digests of the parts of a store something reads: ``((kind, name, digest), ...)``."""

    parts: tuple[tuple[str, str, str], ...]

    @classmethod
    def of(cls, reads: Reads, **names: str | None) -> ReadIdentity:
        """What a reader reads of a store now (see :func:`identity_of`)."""
        return identity_of(reads, **names)

    def changed(self, other: ReadIdentity) -> str | None:
        """What differs in ``other``, in words (the first part that does), or None."""
        found = {(kind, name): digest for kind, name, digest in other.parts}
        for kind, name, digest in self.parts:
            if found.get((kind, name)) != digest:
                return _SAID[kind].format(name)
        return None

    def names(self) -> dict[str, str]:
        """The parts as :func:`identity_of` takes them."""
        return {kind: name for kind, name, _ in self.parts if kind != "build"}


def identity_of(reads: Reads, **names: str | None) -> ReadIdentity:
    """The identity of the build and of each named ``mixture``, ``spec`` or ``plan``, read
    through a store handle or a writer's working copy."""
    wanted = [("build", "")] + [(kind, name) for kind, name in names.items() if name is not None]
    parts = []
    for kind, name in wanted:
        found = reads.all(_PARTS[kind], *(() if kind == "build" else (name,)))
        digest = hashlib.sha256(json.dumps([list(row) for row in found], default=str).encode()).hexdigest()
        parts.append((kind, name, digest))
    return ReadIdentity(tuple(parts))

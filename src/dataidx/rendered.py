"""Rendered reads: a mixture's training entries under a spec, and the packs of a stored plan.

Both check on open that the tokenizer still has the fingerprint the lengths were computed
with, so training never mixes a plan with a different tokenization. A mixture read through a
spec serves only the positions whose entries train (status ok or truncated); when every entry
trains (the spec records how many do) no position array is built at all.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import StaleStoreError
from .positions import position_entries, spec_lengths
from .reader import EntryReader, StoreReader, paused_gc
from .render_spec import StoredSpec, read_spec
from .rendering import Renderer
from .stored import read_mixture
from .storefile import connect_readonly, not_found


def _open_spec(path: str, spec: str, tokenizer: Any) -> tuple[StoredSpec, Renderer]:
    connection = connect_readonly(path)
    try:
        stored = read_spec(connection, spec, path)
    finally:
        connection.close()
    return stored, stored.renderer(tokenizer)


class RenderedMixture:
    """Training entries of one mixture, rendered with a stored spec: ``input_ids``, ``labels``...

    Example::

        rendered = RenderedMixture("demo.db", "default", spec="default")
        rendered.get(0)["input_ids"]
    """

    def __init__(self, path: str | os.PathLike[str], mixture: str = "default", *, spec: str,
                 tokenizer: Any = None, verify: bool = True) -> None:
        self.reader = StoreReader(path, mixture, verify=verify)
        self.spec, self.renderer = _open_spec(self.reader.path, spec, tokenizer)
        self.positions: np.ndarray | None = None
        if self.spec.kept != self.spec.entries:
            connection = connect_readonly(self.reader.path)
            try:
                entries = position_entries(connection, read_mixture(connection, mixture, self.reader.path))
                _, trains = spec_lengths(connection, self.spec.id).of(entries)
            finally:
                connection.close()
            self.positions = np.flatnonzero(trains)

    def __len__(self) -> int:
        return len(self.reader) if self.positions is None else len(self.positions)

    def _position(self, index: int) -> int:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} training entries under spec '{self.spec.name}'")
        index %= len(self)
        return index if self.positions is None else int(self.positions[index])

    def get(self, index: int) -> dict[str, Any]:
        return self.get_many([index])[0]

    def get_many(self, indices: list[int]) -> list[dict[str, Any]]:
        """Rendered entries at many indices, in the order asked (at most two SQL queries)."""
        triples = self.reader.triples([self._position(i) for i in indices])
        with paused_gc():
            return [self._render(*triple) for triple in triples]

    def _render(self, dataset_id: int, row: int, cut: int | None) -> dict[str, Any]:
        rendered = self.renderer.render(self.reader.sample(dataset_id, row, cut), has_cut=cut is not None)
        if not rendered.trains:  # the stored status said it trains: the data no longer agrees
            raise StaleStoreError(f"{self.reader.path}: an entry now renders as {rendered.status} ({rendered.detail}) "
                                  f"under spec '{self.spec.name}'; run dataidx render again")
        return {"_dataset_name": self.reader.datasets[dataset_id].name, **rendered.as_dict()}


class PackedPlan:
    """The packs of a stored plan; item ``i`` is pack ``i``: its members rendered, in slot order.

    Example::

        packs = PackedPlan("demo.db", "default")
        [len(sample["input_ids"]) for sample in packs.get(0)]
    """

    def __init__(self, path: str | os.PathLike[str], plan: str = "default", *, tokenizer: Any = None,
                 verify: bool = True) -> None:
        self.reader = EntryReader(path, verify=verify)
        self.plan = plan
        connection = connect_readonly(self.reader.path)
        try:
            row = connection.execute(
                "SELECT p.id, p.packs, p.capacity, s.name FROM packing_plans AS p "
                "JOIN render_specs AS s ON s.id = p.spec_id WHERE p.name = ?", (plan,),
            ).fetchone()
            if row is None:
                raise not_found(connection, "packing_plans", "packing plan", plan, self.reader.path, "; run dataidx pack")
        finally:
            connection.close()
        self.plan_id, self.packs, self.capacity, spec = row
        self.spec, self.renderer = _open_spec(self.reader.path, spec, tokenizer)

    def __len__(self) -> int:
        return self.packs

    def get(self, index: int) -> list[dict[str, Any]]:
        """The rendered members of pack ``index`` (negative counts from the end)."""
        if not -self.packs <= index < self.packs:
            raise IndexError(f"pack {index} out of range for plan '{self.plan}' of {self.packs} packs")
        members = self.reader._query(
            "SELECT e.entry_id, r.tokens FROM packs AS k "
            "JOIN packed_entries AS e ON e.id BETWEEN k.first_member AND k.first_member + k.members - 1 "
            "JOIN entry_renders AS r ON r.spec_id = ? AND r.entry_id = e.entry_id "
            "WHERE k.plan_id = ? AND k.pack = ? ORDER BY e.id",
            (self.spec.id, self.plan_id, index % self.packs),
        )
        triples = self.reader.entries_by_id([entry_id for entry_id, _ in members])
        samples = []
        with paused_gc():
            for (dataset_id, row, cut), (_, tokens) in zip(triples, members):
                rendered = self.renderer.render(self.reader.sample(dataset_id, row, cut), has_cut=cut is not None)
                if rendered.tokens != tokens or not rendered.trains:
                    raise StaleStoreError(
                        f"{self.reader.path}: plan '{self.plan}' expects {tokens} tokens for an entry that now renders "
                        f"to {rendered.tokens} ({rendered.status}); run dataidx render and dataidx pack again"
                    )
                samples.append({"_dataset_name": self.reader.datasets[dataset_id].name, **rendered.as_dict()})
        return samples


def rendered_position(path: str | os.PathLike[str], mixture: str, spec: str, positions: list[int], *,
                      verify: bool = True) -> list[dict[str, Any]]:
    """Mixture positions rendered with a spec, whatever their status (``dataidx show --render``):
    each dict has ``status`` (and ``detail`` when there is one) besides the model inputs."""
    reader = StoreReader(path, mixture, verify=verify)
    _, renderer = _open_spec(reader.path, spec, None)
    shown = []
    for position in positions:
        (dataset_id, row, cut), = reader.triples([position])
        rendered = renderer.render(reader.sample(dataset_id, row, cut), has_cut=cut is not None)
        extra = {"detail": rendered.detail} if rendered.detail else {}
        shown.append({"_dataset_name": reader.datasets[dataset_id].name, "status": rendered.status, **extra,
                      **rendered.as_dict()})
    return shown

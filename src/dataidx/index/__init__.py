"""Writing the index: a config's datasets expanded into base entries, and seeded mixtures drawn
from them. Names are imported on first use: this package writes through SQLAlchemy, which
opening a store never needs."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

if TYPE_CHECKING:  # the same names, for type checkers and editors (tests/test_layers.py keeps them equal)
    from .budgets import Lengths, budget_draw
    from .datasets import DatasetSummary
    from .mixtures import MixtureSummary, add_mixture
    from .pipeline import BuildSummary, build
    from .sampling import Draw, derive_seed, draw, epoch_seed, sample_mask


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "BuildSummary": ".pipeline",
    "build": ".pipeline",
    "DatasetSummary": ".datasets",
    "MixtureSummary": ".mixtures",
    "add_mixture": ".mixtures",
    "Draw": ".sampling",
    "derive_seed": ".sampling",
    "epoch_seed": ".sampling",
    "budget_draw": ".budgets",
    "Lengths": ".budgets",
    "draw": ".sampling",
    "sample_mask": ".sampling",
})

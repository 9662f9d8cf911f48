"""Writing the index: a config's datasets expanded into base entries, and seeded mixtures drawn
from them. Names are imported on first use: this package writes through SQLAlchemy, which
opening a store never needs."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .budgets import Lengths as Lengths
    from .budgets import budget_draw as budget_draw
    from .datasets import DatasetSummary as DatasetSummary
    from .mixing import add_mixture as add_mixture
    from .mixtures import MixtureSummary as MixtureSummary
    from .pipeline import BuildSummary as BuildSummary
    from .pipeline import build as build
    from .sampling import Draw as Draw
    from .sampling import derive_seed as derive_seed
    from .sampling import draw as draw
    from .sampling import epoch_seed as epoch_seed
    from .sampling import sample_mask as sample_mask


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "BuildSummary": ".pipeline",
    "build": ".pipeline",
    "DatasetSummary": ".datasets",
    "MixtureSummary": ".mixtures",
    "add_mixture": ".mixing",
    "Draw": ".sampling",
    "derive_seed": ".sampling",
    "epoch_seed": ".sampling",
    "budget_draw": ".budgets",
    "Lengths": ".budgets",
    "draw": ".sampling",
    "sample_mask": ".sampling",
})

"""Writing the index: a config's datasets expanded into base entries, and seeded mixtures drawn
from them. Names are imported on first use: this package writes through SQLAlchemy, which
opening a store never needs."""

from .._lazy import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
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
    "exact_draw": ".sampling",
    "replacement_draw": ".sampling",
    "resample": ".sampling",
    "sample_mask": ".sampling",
})

"""``dataidx pack``: best-fit-decreasing packing plans over a spec's stored lengths, and reading
a plan's packs rendered. Names are imported on first use: storing a plan writes through
SQLAlchemy, serving one does not."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

if TYPE_CHECKING:  # the same names, for type checkers and editors (tests/test_layers.py keeps them equal)
    from .planner import PackPlan, best_fit_decreasing, plan_packs
    from .plans import PackSummary, pack_store
    from .served import PackedPlan


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "PackPlan": ".planner",
    "best_fit_decreasing": ".planner",
    "plan_packs": ".planner",
    "PackSummary": ".plans",
    "pack_store": ".plans",
    "PackedPlan": ".served",
})

"""``dataidx pack``: best-fit-decreasing packing plans over a spec's stored lengths, and reading
a plan's packs rendered. Names are imported on first use: storing a plan writes through
SQLAlchemy, serving one does not."""

from .._lazy import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "PackPlan": ".planner",
    "best_fit_decreasing": ".planner",
    "plan_packs": ".planner",
    "PackSummary": ".plans",
    "pack_store": ".plans",
    "PackedPlan": ".served",
})

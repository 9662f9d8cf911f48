"""``dataidx pack``: best-fit-decreasing packing plans over a spec's stored lengths, and reading
a plan's packs rendered. Names are imported on first use: storing a plan writes through
SQLAlchemy, serving one does not."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .planner import PlannedPacks as PlannedPacks
    from .planner import best_fit_decreasing as best_fit_decreasing
    from .planner import plan_packs as plan_packs
    from .plans import PackSummary as PackSummary
    from .plans import pack_store as pack_store
    from .served import RenderedPacks as RenderedPacks


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "PlannedPacks": ".planner",
    "best_fit_decreasing": ".planner",
    "plan_packs": ".planner",
    "PackSummary": ".plans",
    "pack_store": ".plans",
    "RenderedPacks": ".served",
})

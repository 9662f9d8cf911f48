"""Seeing the data: ``dataidx report`` (one self-contained HTML page of charts, tables and
entries as the model sees them) and ``dataidx serve`` (the store in Datasette). Names are
imported on first use: matplotlib and Datasette load only when a page is drawn or served."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .datasette import COOKBOOK as COOKBOOK
    from .datasette import DESCRIPTIONS as DESCRIPTIONS
    from .datasette import VIEWS as VIEWS
    from .datasette import datasette_app as datasette_app
    from .datasette import datasette_metadata as datasette_metadata
    from .datasette import serve_store as serve_store
    from .glyphs import split_characters as split_characters
    from .glyphs import token_texts as token_texts
    from .guard import served_name as served_name
    from .report import ReportSummary as ReportSummary
    from .report import report_figures as report_figures
    from .report import write_report as write_report


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "ReportSummary": ".report",
    "write_report": ".report",
    "report_figures": ".report",
    "token_texts": ".glyphs",
    "split_characters": ".glyphs",
    "COOKBOOK": ".datasette",
    "DESCRIPTIONS": ".datasette",
    "VIEWS": ".datasette",
    "datasette_metadata": ".datasette",
    "serve_store": ".datasette",
    "datasette_app": ".datasette",
    "served_name": ".guard",
})

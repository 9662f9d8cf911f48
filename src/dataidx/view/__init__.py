"""Seeing the data: ``dataidx report`` (one self-contained HTML page of charts, tables and
entries as the model sees them) and ``dataidx serve`` (the store in Datasette). Names are
imported on first use: matplotlib and Datasette load only when a page is drawn or served."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

if TYPE_CHECKING:  # the same names, for type checkers and editors (tests/test_layers.py keeps them equal)
    from .cookbook import COOKBOOK
    from .datasette import DESCRIPTIONS, VIEWS, datasette_app, datasette_metadata, serve_store
    from .glyphs import split_characters, token_texts
    from .guard import served_name
    from .report import ReportSummary, report_figures, write_report


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "ReportSummary": ".report",
    "write_report": ".report",
    "report_figures": ".report",
    "token_texts": ".glyphs",
    "split_characters": ".glyphs",
    "COOKBOOK": ".cookbook",
    "DESCRIPTIONS": ".datasette",
    "VIEWS": ".datasette",
    "datasette_metadata": ".datasette",
    "serve_store": ".datasette",
    "datasette_app": ".datasette",
    "served_name": ".guard",
})

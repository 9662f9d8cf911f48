"""Seeing the data: ``dataidx report`` (one self-contained HTML page of charts, tables and
entries as the model sees them) and ``dataidx serve`` (the store in Datasette). Names are
imported on first use: matplotlib and Datasette load only when a page is drawn or served."""

from .._lazy import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
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

"""``dataidx export --format``: a spec's stored tokens in trainers' own formats (Megatron
``.bin/.idx``, OLMo-core numpy parts, Parquet with Megatron-Bridge's packed layout). Names are
imported on first use, as every stage's face does."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .formats import FORMATS as FORMATS
    from .token_export import export_tokens as export_tokens
    from .writer import ExportSummary as ExportSummary


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "FORMATS": ".formats",
    "ExportSummary": ".writer",
    "export_tokens": ".token_export",
})

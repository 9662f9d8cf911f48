"""Evidence about data: near-duplicate rows (``dataidx dedup``) and benchmark leaks (``dataidx
decontaminate``), found on CPU and stored as named lists with what was found per entry. Names
are imported on first use."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal).
if TYPE_CHECKING:
    from .decontaminate import find_leaks as find_leaks
    from .duplicates import find_duplicates as find_duplicates
    from .eval_sets import parse_eval as parse_eval
    from .eval_sets import read_eval as read_eval
    from .texts import sample_text as sample_text


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "find_duplicates": ".duplicates",
    "find_leaks": ".decontaminate",
    "parse_eval": ".eval_sets",
    "read_eval": ".eval_sets",
    "sample_text": ".texts",
})

"""A mixture's entries -> samples, without torch: readers, training orders, verifying a store
against its sources, and the sample export (a mixture's samples to a file). Names are imported
on first use: a command that names entries (``dataidx steps``) loads neither the converters nor
pyarrow, which reading rows and exporting need."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .entries import MixtureEntries as MixtureEntries
    from .holding import row_entries as row_entries
    from .media_check import REBUILD as REBUILD
    from .media_check import media_place as media_place
    from .media_check import media_stat as media_stat
    from .order import RunNumbering as RunNumbering
    from .order import SkippingOrder as SkippingOrder
    from .order import TrainingOrder as TrainingOrder
    from .order import epoch_steps as epoch_steps
    from .order import step_items as step_items
    from .reader import EntryReader as EntryReader
    from .reader import StoreReader as StoreReader
    from .rows import open_rows as open_rows
    from .sample_export import export_mixture as export_mixture
    from .sample_export import to_hf as to_hf
    from .verify import dataset_problems as dataset_problems
    from .verify import verify_store as verify_store

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "EntryReader": ".reader",
    "MixtureEntries": ".entries",
    "RunNumbering": ".order",
    "SkippingOrder": ".order",
    "StoreReader": ".reader",
    "TrainingOrder": ".order",
    "dataset_problems": ".verify",
    "epoch_steps": ".order",
    "export_mixture": ".sample_export",
    "REBUILD": ".media_check",
    "media_place": ".media_check",
    "media_stat": ".media_check",
    "open_rows": ".rows",
    "row_entries": ".holding",
    "step_items": ".order",
    "to_hf": ".sample_export",
    "verify_store": ".verify",
})

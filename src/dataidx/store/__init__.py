"""Where a store lives and how it is opened, written and queried: the one layer that knows SQL.

A store is a SQLite file or a PostgreSQL schema; :mod:`.connect`, :mod:`.write` and
:mod:`.query` choose between :mod:`.sqlite` and :mod:`.postgres`, and nothing else does. This
face offers what the other stages use (tests/test_layers.py holds it to that); tests and scripts
import the rest from the module that defines it. Names are imported on first use: reading a store
never loads SQLAlchemy, which only writers need.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .base.records import Datasets as Datasets
    from .compose import composition as composition
    from .connect import open_store as open_store
    from .connect import reading as reading
    from .cookbook import COOKBOOK as COOKBOOK
    from .deletes import remove_mixture as remove_mixture
    from .deletes import remove_packing_plan as remove_packing_plan
    from .deletes import remove_render_spec as remove_render_spec
    from .descriptions import DESCRIPTIONS as DESCRIPTIONS
    from .evidence.records import Evidence as Evidence
    from .figures import PositionFigures as PositionFigures
    from .handle import Closable as Closable
    from .handle import Store as Store
    from .handle import StoreHandle as StoreHandle
    from .identity import ReadIdentity as ReadIdentity
    from .info import store_info as store_info
    from .location import store_location as store_location
    from .media.records import Media as Media
    from .mixtures.records import Mixtures as Mixtures
    from .orders.records import Orders as Orders
    from .orders.records import RecordedOrder as RecordedOrder
    from .outputs import check_output as check_output
    from .plans.records import Plans as Plans
    from .query import run_query as run_query
    from .revisions import SCHEMA_REVISION as SCHEMA_REVISION
    from .specs.records import Specs as Specs
    from .sqlite.bounds import Bounds as Bounds
    from .summary_checks import recount_problems as recount_problems
    from .write import NewStore as NewStore
    from .write import creating as creating
    from .write import migrate_store as migrate_store
    from .write import rewriting as rewriting


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    # where a store lives, and reading it
    "store_location": ".location",
    "SCHEMA_REVISION": ".revisions",
    "open_store": ".connect",
    "reading": ".connect",
    "Closable": ".handle",
    "Store": ".handle",
    "StoreHandle": ".handle",
    "ReadIdentity": ".identity",
    "run_query": ".query",
    "Bounds": ".sqlite.bounds",
    # the nouns: each owns its tables, reads, writes and removal
    "Datasets": ".base.records",
    "Mixtures": ".mixtures.records",
    "Specs": ".specs.records",
    "Plans": ".plans.records",
    "Orders": ".orders.records",
    "Media": ".media.records",
    "Evidence": ".evidence.records",
    "RecordedOrder": ".orders.records",
    # across the nouns
    "store_info": ".info",
    "composition": ".compose",
    "recount_problems": ".summary_checks",
    "remove_mixture": ".deletes",
    "remove_packing_plan": ".deletes",
    "remove_render_spec": ".deletes",
    "PositionFigures": ".figures",
    # the documented SQL (docs/sql.md) and what each table and view holds
    "COOKBOOK": ".cookbook",
    "DESCRIPTIONS": ".descriptions",
    # writing
    "NewStore": ".write",
    "creating": ".write",
    "rewriting": ".write",
    "migrate_store": ".write",
    "check_output": ".outputs",
})

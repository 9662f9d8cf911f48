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
    from .compose import COMPOSITION_COLUMNS as COMPOSITION_COLUMNS
    from .compose import REASONING_COLUMNS as REASONING_COLUMNS
    from .compose import TOKEN_COLUMNS as TOKEN_COLUMNS
    from .compose import composition as composition
    from .compose import composition_problems as composition_problems
    from .connect import check_store as check_store
    from .connect import open_store as open_store
    from .connect import reading as reading
    from .cookbook import COOKBOOK as COOKBOOK
    from .deletes import remove_mixture as remove_mixture
    from .deletes import remove_packing_plan as remove_packing_plan
    from .deletes import remove_render_spec as remove_render_spec
    from .descriptions import DESCRIPTIONS as DESCRIPTIONS
    from .figures import PositionFigures as PositionFigures
    from .handle import Closable as Closable
    from .handle import Store as Store
    from .handle import StoreHandle as StoreHandle
    from .identity import ReadIdentity as ReadIdentity
    from .identity import identity_of as identity_of
    from .info import store_info as store_info
    from .location import store_location as store_location
    from .location import streams_folder as streams_folder
    from .location import tokens_folder as tokens_folder
    from .mixtures.draws import DrawSummary as DrawSummary
    from .mixtures.records import Mixtures as Mixtures
    from .orders.records import Orders as Orders
    from .orders.records import RecordedOrder as RecordedOrder
    from .outputs import check_output as check_output
    from .outputs import check_output_folder as check_output_folder
    from .plans.records import Plans as Plans
    from .positions import SpecLengths as SpecLengths
    from .positions import spec_lengths as spec_lengths
    from .query import run_query as run_query
    from .revisions import SCHEMA_REVISION as SCHEMA_REVISION
    from .specs.records import Specs as Specs
    from .sqlite.bounds import interrupt_statements as interrupt_statements
    from .sqlite.bounds import open_bounded as open_bounded
    from .sqlite.read import stopped_read as stopped_read
    from .sqlite.sql_functions import refused_function as refused_function
    from .summary_checks import summary_problems as summary_problems
    from .write import NewStore as NewStore
    from .write import creating as creating
    from .write import migrate_store as migrate_store
    from .write import rewriting as rewriting


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    # where a store lives
    "store_location": ".location",
    "streams_folder": ".location",
    "tokens_folder": ".location",
    # reading
    "SCHEMA_REVISION": ".revisions",
    "open_store": ".connect",
    "reading": ".connect",
    "check_store": ".connect",
    "Closable": ".handle",
    "Store": ".handle",
    "StoreHandle": ".handle",
    "ReadIdentity": ".identity",
    "identity_of": ".identity",
    "run_query": ".query",
    "stopped_read": ".sqlite.read",
    "refused_function": ".sqlite.sql_functions",
    "open_bounded": ".sqlite.bounds",
    "interrupt_statements": ".sqlite.bounds",
    # the nouns
    "Datasets": ".base.records",
    "Mixtures": ".mixtures.records",
    "Specs": ".specs.records",
    "Plans": ".plans.records",
    "Orders": ".orders.records",
    "RecordedOrder": ".orders.records",
    "DrawSummary": ".mixtures.draws",
    "SpecLengths": ".positions",
    "spec_lengths": ".positions",
    # across the nouns
    "store_info": ".info",
    "composition": ".compose",
    "COMPOSITION_COLUMNS": ".compose",
    "TOKEN_COLUMNS": ".compose",
    "REASONING_COLUMNS": ".compose",
    "composition_problems": ".compose",
    "summary_problems": ".summary_checks",
    "PositionFigures": ".figures",
    # the documented SQL (docs/sql.md) and what each table and view holds
    "COOKBOOK": ".cookbook",
    "DESCRIPTIONS": ".descriptions",
    "remove_mixture": ".deletes",
    "remove_packing_plan": ".deletes",
    "remove_render_spec": ".deletes",
    # writing
    "NewStore": ".write",
    "creating": ".write",
    "rewriting": ".write",
    "migrate_store": ".write",
    "check_output": ".outputs",
    "check_output_folder": ".outputs",
})

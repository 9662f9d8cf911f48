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
    from .causes import CauseRow as CauseRow
    from .causes import render_causes as render_causes
    from .causes import spec_causes as spec_causes
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
    from .dialect import STATUSES as STATUSES
    from .dialect import TRAINING_STATUSES as TRAINING_STATUSES
    from .figures import PositionFigures as PositionFigures
    from .handle import Closable as Closable
    from .handle import Store as Store
    from .handle import StoreHandle as StoreHandle
    from .identity import ReadIdentity as ReadIdentity
    from .identity import identity_of as identity_of
    from .info import REASONING_SAID as REASONING_SAID
    from .info import added_token_uses as added_token_uses
    from .info import merging_plans as merging_plans
    from .info import store_info as store_info
    from .location import store_folder as store_folder
    from .location import store_location as store_location
    from .location import streams_folder as streams_folder
    from .location import tokens_folder as tokens_folder
    from .mixtures.draws import DrawSummary as DrawSummary
    from .mixtures.draws import insert_dataset_turns as insert_dataset_turns
    from .mixtures.draws import row_lengths as row_lengths
    from .mixtures.records import Mixtures as Mixtures
    from .orders.records import Orders as Orders
    from .orders.records import RecordedOrder as RecordedOrder
    from .outputs import check_output as check_output
    from .outputs import check_output_folder as check_output_folder
    from .packs import EpochPacks as EpochPacks
    from .packs import save_packing_plan as save_packing_plan
    from .plan_checks import plan_problems as plan_problems
    from .positions import SpecLengths as SpecLengths
    from .positions import base_entry_range as base_entry_range
    from .positions import row_starts as row_starts
    from .positions import spec_lengths as spec_lengths
    from .query import run_query as run_query
    from .records import REASONING as REASONING
    from .records import REASONING_PROBLEMS as REASONING_PROBLEMS
    from .records import StoredDataset as StoredDataset
    from .records import read_datasets as read_datasets
    from .renders import LengthRow as LengthRow
    from .renders import StoredRow as StoredRow
    from .renders import budget_mixtures_drawn_before as budget_mixtures_drawn_before
    from .renders import move_spec_tokenizer as move_spec_tokenizer
    from .renders import render_counts as render_counts
    from .renders import save_render_spec as save_render_spec
    from .revisions import SCHEMA_REVISION as SCHEMA_REVISION
    from .schema import Build as Build
    from .schema import Dataset as Dataset
    from .schema import RejectedRow as RejectedRow
    from .sqlite.bounds import interrupt_statements as interrupt_statements
    from .sqlite.bounds import open_bounded as open_bounded
    from .sqlite.bulk import insert_base_entries as insert_base_entries
    from .sqlite.read import stopped_read as stopped_read
    from .sqlite.sql_functions import refused_function as refused_function
    from .summary_checks import summary_problems as summary_problems
    from .tokens import EntryTokens as EntryTokens
    from .tokens import StoredTokenFile as StoredTokenFile
    from .tokens import default_token_folder as default_token_folder
    from .tokens import own_token_files as own_token_files
    from .tokens import place_entry_tokens as place_entry_tokens
    from .tokens import prune_token_files as prune_token_files
    from .tokens import read_token_file as read_token_file
    from .tokens import save_token_file as save_token_file
    from .tokens import spec_id_of as spec_id_of
    from .tokens import stored_lengths as stored_lengths
    from .write import NewStore as NewStore
    from .write import creating as creating
    from .write import migrate_store as migrate_store
    from .write import rewriting as rewriting


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    # where a store lives
    "store_folder": ".location",
    "store_location": ".location",
    # reading
    "SCHEMA_REVISION": ".revisions",
    "open_store": ".connect",
    "reading": ".connect",
    "check_store": ".connect",
    "Closable": ".handle",
    "Store": ".handle",
    "StoreHandle": ".handle",
    "stopped_read": ".sqlite.read",
    "STATUSES": ".dialect",
    "TRAINING_STATUSES": ".dialect",
    "REASONING": ".records",
    "REASONING_PROBLEMS": ".records",
    "StoredDataset": ".records",
    "read_datasets": ".records",
    "render_counts": ".renders",
    "run_query": ".query",
    "refused_function": ".sqlite.sql_functions",
    "open_bounded": ".sqlite.bounds",
    "interrupt_statements": ".sqlite.bounds",
    "ReadIdentity": ".identity",
    "identity_of": ".identity",
    "SpecLengths": ".positions",
    "base_entry_range": ".positions",
    "row_starts": ".positions",
    "spec_lengths": ".positions",
    "store_info": ".info",
    "added_token_uses": ".info",
    "merging_plans": ".info",
    "REASONING_SAID": ".info",
    "COMPOSITION_COLUMNS": ".compose",
    "TOKEN_COLUMNS": ".compose",
    "REASONING_COLUMNS": ".compose",
    "composition": ".compose",
    "composition_problems": ".compose",
    "summary_problems": ".summary_checks",
    "plan_problems": ".plan_checks",
    "PositionFigures": ".figures",
    # the documented SQL (docs/sql.md) and what each table and view holds
    "COOKBOOK": ".cookbook",
    "DESCRIPTIONS": ".descriptions",
    # writing
    "NewStore": ".write",
    "creating": ".write",
    "migrate_store": ".write",
    "rewriting": ".write",
    "streams_folder": ".location",
    "tokens_folder": ".location",
    "EntryTokens": ".tokens",
    "StoredTokenFile": ".tokens",
    "read_token_file": ".tokens",
    "save_token_file": ".tokens",
    "place_entry_tokens": ".tokens",
    "default_token_folder": ".tokens",
    "own_token_files": ".tokens",
    "prune_token_files": ".tokens",
    "spec_id_of": ".tokens",
    "stored_lengths": ".tokens",
    "insert_base_entries": ".sqlite.bulk",
    "DrawSummary": ".mixtures.draws",
    "insert_dataset_turns": ".mixtures.draws",
    "row_lengths": ".mixtures.draws",
    "save_render_spec": ".renders",
    "budget_mixtures_drawn_before": ".renders",
    "LengthRow": ".renders",
    "StoredRow": ".renders",
    "CauseRow": ".causes",
    "render_causes": ".causes",
    "spec_causes": ".causes",
    "move_spec_tokenizer": ".renders",
    "save_packing_plan": ".packs",
    "EpochPacks": ".packs",
    "remove_mixture": ".deletes",
    "remove_packing_plan": ".deletes",
    "remove_render_spec": ".deletes",
    "check_output": ".outputs",
    "check_output_folder": ".outputs",
    # the nouns
    "Mixtures": ".mixtures.records",
    "Orders": ".orders.records",
    "RecordedOrder": ".orders.records",
    # the schema
    "Build": ".schema",
    "Dataset": ".schema",
    "RejectedRow": ".schema",
})

"""Where a store lives and how it is opened, written and queried: the one layer that knows SQL.

A store is a SQLite file or a PostgreSQL schema; :mod:`.connect`, :mod:`.write` and
:mod:`.query` choose between :mod:`.sqlite` and :mod:`.postgres`, and nothing else does. This
face offers what the other stages use (tests/test_layers.py holds it to that); tests and scripts
import the rest from the module that defines it. Names are imported on first use: reading a store
never loads SQLAlchemy, which only writers need.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

if TYPE_CHECKING:  # the same names, for type checkers and editors (tests/test_layers.py keeps them equal)
    from .causes import CauseRow, render_causes, spec_causes
    from .compose import COMPOSITION_COLUMNS, REASONING_COLUMNS, TOKEN_COLUMNS, composition, composition_problems
    from .connect import SCHEMA_REVISION, connect_readonly, not_found
    from .deletes import remove_mixture, remove_packing_plan, remove_render_spec
    from .dialect import ReadConnection
    from .identity import ReadIdentity, identity_of
    from .info import REASONING_SAID, added_token_uses, store_info
    from .location import store_location, streams_folder
    from .outputs import check_output
    from .packs import EpochPacks, save_packing_plan
    from .positions import SpecLengths, position_entries, spec_lengths
    from .query import run_query
    from .records import (
        REASONING,
        REASONING_PROBLEMS,
        STATUSES,
        TRAINS,
        StoredDataset,
        check_epoch,
        mixture_epochs,
        read_datasets,
        read_mixture,
        served_epoch,
        serving,
    )
    from .renders import LengthRow, budget_mixtures_drawn_before, move_spec_tokenizer, render_counts, save_render_spec
    from .schema import Build, Dataset, EpochDataset, Mixture, MixtureDataset, MixtureEpoch, RejectedRow
    from .sqlite.bulk import PositionWriter, draw_counts, insert_base_entries
    from .sqlite.read import stopped_read
    from .sqlite.sql_functions import refused_function
    from .write import NewStore, creating, migrate_store, rewriting


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    # where a store lives
    "store_location": ".location",
    # reading
    "ReadConnection": ".dialect",
    "SCHEMA_REVISION": ".connect",
    "connect_readonly": ".connect",
    "not_found": ".connect",
    "stopped_read": ".sqlite.read",
    "STATUSES": ".records",
    "TRAINS": ".records",
    "REASONING": ".records",
    "REASONING_PROBLEMS": ".records",
    "StoredDataset": ".records",
    "read_datasets": ".records",
    "read_mixture": ".records",
    "check_epoch": ".records",
    "served_epoch": ".records",
    "serving": ".records",
    "mixture_epochs": ".records",
    "render_counts": ".renders",
    "run_query": ".query",
    "refused_function": ".sqlite.sql_functions",
    "ReadIdentity": ".identity",
    "identity_of": ".identity",
    "SpecLengths": ".positions",
    "position_entries": ".positions",
    "spec_lengths": ".positions",
    "store_info": ".info",
    "added_token_uses": ".info",
    "REASONING_SAID": ".info",
    "COMPOSITION_COLUMNS": ".compose",
    "TOKEN_COLUMNS": ".compose",
    "REASONING_COLUMNS": ".compose",
    "composition": ".compose",
    "composition_problems": ".compose",
    # writing
    "NewStore": ".write",
    "creating": ".write",
    "migrate_store": ".write",
    "rewriting": ".write",
    "streams_folder": ".location",
    "insert_base_entries": ".sqlite.bulk",
    "PositionWriter": ".sqlite.bulk",
    "draw_counts": ".sqlite.bulk",
    "save_render_spec": ".renders",
    "budget_mixtures_drawn_before": ".renders",
    "LengthRow": ".renders",
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
    # the schema
    "Build": ".schema",
    "Dataset": ".schema",
    "Mixture": ".schema",
    "MixtureDataset": ".schema",
    "MixtureEpoch": ".schema",
    "EpochDataset": ".schema",
    "RejectedRow": ".schema",
})

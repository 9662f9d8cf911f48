"""Where a store lives and how it is opened, written and queried: the one layer that knows SQL.

A store is a SQLite file or a PostgreSQL schema; :mod:`.connect`, :mod:`.write` and
:mod:`.query` choose between :mod:`.sqlite` and :mod:`.postgres`, and nothing else does. Names
are imported on first use: reading a store never loads SQLAlchemy, which only writers need.
"""

from .._lazy import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    # where a store lives
    "PostgresStore": ".location",
    "store_location": ".location",
    "postgres_conninfo": ".postgres.read",
    # reading
    "ReadConnection": ".dialect",
    "SCHEMA_REVISION": ".connect",
    "connect_readonly": ".connect",
    "not_found": ".connect",
    "store_revision": ".connect",
    "STATUSES": ".records",
    "TRAINS": ".records",
    "StoredDataset": ".records",
    "StoredMixture": ".records",
    "read_datasets": ".records",
    "read_mixture": ".records",
    "read_epochs": ".records",
    "check_epoch": ".records",
    "stale_budget_mixtures": ".records",
    "render_counts": ".renders",
    "run_query": ".query",
    "ReadIdentity": ".identity",
    "identity_of": ".identity",
    "SpecLengths": ".positions",
    "position_entries": ".positions",
    "spec_lengths": ".positions",
    "store_info": ".info",
    "COMPOSITION_COLUMNS": ".compose",
    "TOKEN_COLUMNS": ".compose",
    "composition": ".compose",
    "composition_problems": ".compose",
    # writing
    "NewStore": ".write",
    "creating": ".write",
    "migrate_store": ".write",
    "rewriting": ".write",
    "streams_folder": ".location",
    "insert_base_entries": ".sqlite.bulk",
    "insert_mixture_entries": ".sqlite.bulk",
    "PositionWriter": ".sqlite.bulk",
    "draw_counts": ".sqlite.bulk",
    "save_render_spec": ".renders",
    "budget_mixtures_drawn_before": ".renders",
    "LengthRow": ".renders",
    "move_spec_tokenizer": ".renders",
    "save_packing_plan": ".packs",
    "EpochPacks": ".packs",
    "remove_mixture": ".deletes",
    "remove_packing_plan": ".deletes",
    "remove_render_spec": ".deletes",
    "check_output": ".outputs",
    "held_beyond_build": ".holdings",
    # the schema
    "Base": ".schema",
    "Build": ".schema",
    "Dataset": ".schema",
    "Mixture": ".schema",
    "MixtureDataset": ".schema",
    "MixtureEpoch": ".schema",
    "EpochDataset": ".schema",
    "RenderSpecRow": ".schema",
    "RejectedRow": ".schema",
    "VIEW_COLUMNS": ".schema",
    "schema_script": ".schema",
    "create_store": ".sqlite.files",
    "alembic_config": ".sqlite.migrations",
    "migrated_schema": ".sqlite.migrations",
    "migrations_dir": ".sqlite.migrations",
})

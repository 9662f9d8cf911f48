"""Alembic for store files: upgrading an older store (scripts/snapshot_schema.py runs the migrations
to write ``schema.sql``, the schema a new store starts from).

Migrations live in ``migrations/`` at the top of the repository and ship in the wheel as
``dataidx._migrations``. Alembic is imported only here, and only when a store is migrated.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from sqlalchemy import Connection


def migrations_dir() -> str:
    """The Alembic script folder, wherever the package is installed (shipped in the wheel)."""
    return str(resources.files("dataidx._migrations"))


def alembic_config(connection: Connection) -> Any:
    """An Alembic ``Config`` that migrates ``connection`` (never a URL from an ini file)."""
    from alembic.config import Config  # here, not at import: only migrating needs Alembic

    config = Config()
    config.set_main_option("script_location", migrations_dir())
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection) -> None:
    """Run every migration the store on ``connection`` lacks."""
    from alembic import command  # here, not at import: only migrating needs Alembic

    command.upgrade(alembic_config(connection), "head")


"""Regenerate src/dataidx/store/schema.sql from the Alembic migrations (run after adding one).

    python scripts/snapshot_schema.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dataidx.store.sqlite.migrations import migrated_schema

TARGET = Path(__file__).resolve().parents[1] / "src" / "dataidx" / "store" / "schema.sql"

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        TARGET.write_text(migrated_schema(Path(folder) / "schema.db"))
    print(f"wrote {TARGET}")

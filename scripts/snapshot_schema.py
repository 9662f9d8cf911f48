"""Regenerate src/dataidx/store/schema.sql from the Alembic migrations (run after adding one).

    python scripts/snapshot_schema.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import migrated_schema  # noqa: E402

TARGET = REPO / "src" / "dataidx" / "store" / "schema.sql"

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        TARGET.write_text(migrated_schema(Path(folder) / "schema.db"))
    print(f"wrote {TARGET}")

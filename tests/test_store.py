"""Store files: schema from Alembic matches the models, version checks, bad files, the wheel."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import create_engine

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import StoreError
from dataidx.store import SCHEMA_REVISION, run_query
from dataidx.store.schema import VIEW_COLUMNS, Base, schema_script
from dataidx.store.sqlite.files import create_store
from dataidx.store.sqlite.migrations import alembic_config, migrations_dir

from .helpers import REPO, migrated_schema


def test_migrations_create_exactly_the_models(tmp_path: Path) -> None:
    engine = create_store(tmp_path / "s.db")
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"render_as_batch": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_code_revision_is_the_migrations_head(tmp_path: Path) -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as connection:
        script = ScriptDirectory.from_config(alembic_config(connection))
        assert script.get_current_head() == SCHEMA_REVISION


def test_views_have_their_documented_columns(tmp_path: Path) -> None:
    create_store(tmp_path / "s.db").dispose()
    for view, columns in VIEW_COLUMNS.items():
        found, _ = run_query(tmp_path / "s.db", f"SELECT * FROM {view}")
        assert tuple(found) == columns


def test_store_opens_in_stock_sqlite3(demo_store: Path) -> None:
    connection = sqlite3.connect(demo_store)
    assert connection.execute("SELECT sum(entries) FROM composition").fetchone() == (37,)
    assert connection.execute("SELECT count(*) FROM entries WHERE mixture = 'default'").fetchone() == (37,)
    connection.close()


def test_bad_store_files_get_one_clear_error(tmp_path: Path, make_store) -> None:
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreError, match="not a dataidx store \\(no schema version\\)"):
        DataEngine(plain)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\x00" + os.urandom(2000))
    with pytest.raises(StoreError, match="cannot read store"):
        DataEngine(garbage)
    with pytest.raises(StoreError, match="is a folder"):
        DataEngine(tmp_path)
    newer = make_store(REPO / "data" / "demo_dpo.yaml")
    connection = sqlite3.connect(newer)
    connection.execute("UPDATE alembic_version SET version_num = '9999'")
    connection.commit()
    connection.close()
    with pytest.raises(StoreError, match="store schema revision '9999' is unknown to this dataidx "
                                         f".newest '{SCHEMA_REVISION}'.; it was made by a newer dataidx"):
        DataEngine(newer)


@pytest.mark.slow
def test_the_wheel_ships_migrations_that_create_a_store(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(REPO)],
        check=True, capture_output=True,
    )
    (wheel,) = tmp_path.glob("dataidx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "dataidx/_migrations/env.py" in names
    assert "dataidx/_migrations/versions/0001_initial.py" in names
    assert "dataidx/py.typed" in names  # PEP 561: type checkers read the installed package's annotations
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    script = (
        "from dataidx.store.sqlite import files, migrations; e = files.create_store('made.db'); e.dispose();"
        "import sqlite3; "
        "print(sqlite3.connect('made.db').execute('SELECT version_num FROM alembic_version').fetchone()[0]);"
        "print(migrations.migrations_dir())"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(unpacked)})
    revision, location = result.stdout.split()
    assert revision == SCHEMA_REVISION
    assert location == str(unpacked / "dataidx" / "_migrations")
    assert migrations_dir() == str(REPO / "migrations")


def test_schema_snapshot_is_exactly_what_the_migrations_create(tmp_path: Path) -> None:
    assert schema_script() == migrated_schema(tmp_path / "migrated.db"), "run python scripts/snapshot_schema.py"


def test_writes_in_a_read_only_folder_are_one_line(tmp_path: Path, alpaca3k_store: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; simulate the same failure with a folder that is gone
        result = CliRunner().invoke(cli, ["remove-mixture", str(tmp_path / "gone" / "s.db"), "default"])
        assert result.exit_code == 1 and "store not found" in result.stderr
        return
    os.chmod(tmp_path, 0o555)
    try:
        result = CliRunner().invoke(cli, ["remove-mixture", str(alpaca3k_store), "default"])
        assert result.exit_code == 1 and "is not writable" in result.stderr
    finally:
        os.chmod(tmp_path, 0o755)

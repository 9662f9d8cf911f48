"""Stores in SQLite files: reading with sqlite3, writing aside and renaming, migrating with Alembic."""

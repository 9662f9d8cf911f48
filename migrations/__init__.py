"""Alembic migrations of the dataidx store, shipped in the wheel as ``dataidx._migrations``."""

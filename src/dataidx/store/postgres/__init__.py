"""Stores in PostgreSQL schemas: read-only connections, publishing a finished SQLite copy, queries."""

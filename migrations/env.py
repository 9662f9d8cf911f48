"""Alembic environment: migrate the connection dataidx hands over (never a URL from an ini)."""

from alembic import context

from dataidx.store.schema import Base

connection = context.config.attributes["connection"]
# SQLite cannot ALTER most things in place; batch mode copies tables instead.
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

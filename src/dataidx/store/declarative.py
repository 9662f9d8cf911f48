"""What every table of the store is declared on: the declarative base, its constraint names and
the integer type, apart from the tables so that each group of them can import it."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, MetaData
from sqlalchemy.orm import DeclarativeBase

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


#: 64-bit in every database: SQLite's INTEGER is, PostgreSQL's integer is not (seeds need 64 bits).
INT = Integer().with_variant(BigInteger(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)

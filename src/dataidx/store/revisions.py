"""The schema revisions this code knows: a leaf, so the backends (which publish and check a
revision) and the modules that open and write stores read them without importing each other."""

#: Alembic revision of the newest schema this code reads and writes.
SCHEMA_REVISION = "0022"
#: Every revision a store may carry, oldest first; older ones are upgraded by `dataidx migrate`.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013",
             "0014", "0015", "0016", "0017", "0018", "0019", "0020", "0021")

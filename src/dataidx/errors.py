"""One exception hierarchy for everything dataidx raises on purpose.

Callers catch :class:`DataidxError` for any user-facing failure; subclasses also inherit the
builtin a caller would naturally expect (``FileNotFoundError``, ``KeyError``...) so existing
``except`` clauses keep working. The CLI turns these, and only these, into one line and exit 1.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

# user:password@ in a database URL (spaces and all, up to the last @ of the line), and a
# password= or sslpassword= key in its query or in a libpq "key=value" string, quoted or not:
# messages name the store, never its password.
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/:@\s]*:)[^\n]*@", re.IGNORECASE)
_KEY_PASSWORD = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^&\s'\"]*)", re.IGNORECASE)


#: The most characters of a message a store keeps per entry or row (a render ``detail``, a reject's reason).
DETAIL_LIMIT = 500

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist, _SHOWN.maxstring, _SHOWN.maxother = 2, 4, 4, 60, 60


def shown(value: Any) -> str:
    """``repr(value)`` cut short: a few items, a few levels, 60 characters a string. Any value
    from data or a config goes into a message through this, so a message stays small."""
    return _SHOWN.repr(value)


def bounded(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    rest = f"... ({len(text) - limit} more characters)"
    return text[: max(0, limit - len(rest))] + rest


def hide_passwords(text: str) -> str:
    """``text`` with the password of every URL or connection string in it replaced by ``***``."""
    return _KEY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


class DataidxError(Exception):
    """Base class of every error dataidx raises deliberately; no password shows in its message,
    its ``args`` or its ``repr``, which logs and tracebacks print."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(hide_passwords(arg) if isinstance(arg, str) else arg for arg in args))

    def __str__(self) -> str:
        return hide_passwords(super().__str__())


class UsageError(DataidxError, ValueError):
    """An argument cannot work as given (a seed out of range, an output in a missing folder, SQL
    that does not run); the message says what would."""


class ConfigError(DataidxError, ValueError):
    """A dataset config is invalid; carries every problem found, not just the first."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        count = f"{len(self.problems)} problems" if len(self.problems) > 1 else "1 problem"
        super().__init__(f"{source}: {count}: " + "; ".join(self.problems))


class PluginError(DataidxError, LookupError):
    """A plugin name is unknown in its family; the message lists the known names."""


class SourceError(DataidxError, OSError):
    """A dataset's source cannot be loaded (missing file, unknown extension, malformed data)."""


class MediaError(SourceError):
    """A row names a media file that is missing, unreadable, unsupported or over a bound; names
    dataset, row and file in one line (``cause`` is the file's part, a reject's reason)."""

    def __init__(self, dataset: str, row: int, cause: str) -> None:
        self.dataset, self.row, self.cause = dataset, row, bounded(cause)
        super().__init__(f"dataset '{dataset}', row {row}: {cause}")


class ConversionError(DataidxError, ValueError):
    """A converter failed on one row; names dataset, row and converter."""

    def __init__(self, dataset: str, row: int, converter: str, cause: str) -> None:
        self.dataset = dataset
        self.row = row
        self.converter = converter
        self.cause = bounded(cause)  # a converter's message may quote the row: stored per reject
        super().__init__(f"dataset '{dataset}', row {row}, converter '{converter}': {cause}")


class InvalidRow(DataidxError, ValueError):
    """A converter's own words on why a row cannot be converted (raised from a converter, which
    knows no row number): the build wraps them in a ConversionError naming dataset, row and
    converter, without an exception type in front."""


class StoreError(DataidxError):
    """A store is missing, unreachable, not a dataidx store, corrupt, or of another schema revision."""


class NotFoundError(StoreError, LookupError):
    """A store has no mixture, dataset, render spec or packing plan of that name; the message
    lists the names it has."""


class StaleStoreError(StoreError):
    """A dataset's source or converter changed since the store was built, or the store itself
    was replaced since a reader opened it."""

    @classmethod
    def replaced(cls, store: object) -> StaleStoreError:
        return cls(f"{store}: the store was replaced (rebuilt, or changed by mix, remove-mixture or migrate) "
                   "after this reader opened it; open it again")


class ReadOnlyError(DataidxError, PermissionError):
    """A query tried to change the store through a read-only interface."""


class ExportError(DataidxError, OSError):
    """An export's files could not be written (a full disk, no permission); nothing that looks
    finished is left behind."""


class RenderError(DataidxError, ValueError):
    """An entry cannot be rendered with a template or tokenizer, or a render spec is unusable.
    ``cause`` names why in words that group across entries (``dataidx.render.causes``)."""

    def __init__(self, *args: object, cause: str | None = None) -> None:
        super().__init__(*args)
        self.cause = cause

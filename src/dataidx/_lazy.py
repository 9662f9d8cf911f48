"""Package faces whose names are imported on first use.

A package's ``__init__`` lists what it offers and where each name lives; nothing is imported
until a name is used. So ``dataidx info`` never pays for SQLAlchemy, which only writers need,
and a DataLoader worker never pays for the code that builds stores.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any, Protocol


class NameLookup(Protocol):
    """A face's module ``__getattr__`` (PEP 562), typed as a callable object rather than as a
    function on purpose: a type checker that finds a module-level ``__getattr__`` function takes
    every name as found (of its return type), so ``from dataidx.store import no_such_name`` would
    pass. Typed so, it is ignored and the checker reads the face's ``TYPE_CHECKING`` imports."""

    def __call__(self, name: str, /) -> Any: ...


def lazy_face(package: str, names: dict[str, str]
              ) -> tuple[list[str], NameLookup, Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package`` whose ``names`` map each public name to
    the module, relative to the package, that defines it. Type checkers and editors read the
    face's ``if TYPE_CHECKING:`` imports of the same names instead (tests/test_layers.py keeps the
    two equal); ``__dir__`` lists the names before any is used (completion in a REPL).

    Example::

        __all__, __getattr__, __dir__ = lazy_face(__name__, {"rewriting": ".write"})
    """
    namespace = import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(names[name], package), name)
        namespace[name] = value  # later lookups find it without calling here again
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return sorted(names), __getattr__, __dir__

"""One registry mechanism for every plugin family (sources, converters).

Modelled on LLaMA-Factory v1's ``BasePlugin``, with two improvements: an unknown name lists the
known ones, and each plugin carries a version that the store records, so an index built by
another version of a converter is detected instead of served.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import PluginError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Plugin(Generic[F]):
    """A registered function with the name and version the store records.

    ``fast`` is an optional vectorised variant whose meaning the family defines (converters:
    the cuts of a whole Arrow table), and so is ``prefix`` (converters: ``prefix(row, cut)`` is
    ``func(row)`` with only its first ``cut`` messages, converting no further, for a fetch of a
    cut entry). Re-registering a name drops both with the old function.
    """

    name: str
    version: str
    func: F
    fast: Callable[..., Any] | None = None
    prefix: Callable[..., Any] | None = None


class Registry(Generic[F]):
    """Plugins of one family, registered by decorator and resolved by name.

    Example::

        converters = Registry("converter")

        @converters.register("upper", version="1")
        def upper(row): ...

        converters.get("upper").func(row)
    """

    def __init__(self, family: str) -> None:
        self.family = family
        self._plugins: dict[str, Plugin[F]] = {}

    def register(self, name: str, *, version: str = "1", fast: Callable[..., Any] | None = None,
                 prefix: Callable[..., Any] | None = None) -> Callable[[F], F]:
        """Register the decorated function under ``name``; a taken name warns and is replaced."""

        def decorator(func: F) -> F:
            if name in self._plugins:
                warnings.warn(f"{self.family} plugin '{name}' is registered again; replacing it", stacklevel=2)
            self._plugins[name] = Plugin(name=name, version=str(version), func=func, fast=fast, prefix=prefix)
            return func

        return decorator

    def get(self, name: str) -> Plugin[F]:
        try:
            return self._plugins[name]
        except KeyError:
            raise PluginError(f"unknown {self.family} '{name}' (known: {', '.join(self.names())})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._plugins

    def names(self) -> list[str]:
        return sorted(self._plugins)


#: Entry point group through which installed packages register converters and sources.
ENTRY_POINT_GROUP = "dataidx.plugins"


def load_plugin_modules(modules: list[str]) -> None:
    """Import user modules whose ``@register_converter``/source decorators register plugins.

    A module name (``my_pkg.converters``) or a path to a ``.py`` file; any failure is a
    PluginError naming the module, so ``--plugins`` typos get one clear line.
    """
    for module in modules:
        try:
            if module.endswith(".py"):
                path = Path(module).resolve()
                name = f"dataidx_plugin_{path.stem}"
                if getattr(sys.modules.get(name), "__file__", None) == str(path):
                    continue  # already loaded in this process: registering twice would warn
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None or not path.is_file():
                    raise FileNotFoundError(f"no such file: {path}")
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = loaded
                spec.loader.exec_module(loaded)
            else:
                importlib.import_module(module)
        except Exception as exc:
            raise PluginError(f"cannot load plugin module '{module}': {type(exc).__name__}: {exc}") from None


def load_entry_point_plugins() -> list[str]:
    """Import every module installed packages declare under ``[project.entry-points."dataidx.plugins"]``;
    returns their names. Called by the ``dataidx`` command, never on ``import dataidx``."""
    loaded = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:
            raise PluginError(f"cannot load plugin '{entry.name}' ({entry.value}) from an installed package: "
                              f"{type(exc).__name__}: {exc}") from None
        loaded.append(entry.name)
    return loaded

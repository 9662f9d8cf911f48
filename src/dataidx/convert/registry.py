"""The converter registry: one raw row in, one standard sample out, errors named by row.

A converter must be a pure function of the row. Messages that v1 drops with a warning (unknown
ShareGPT tags, function calls that are not JSON) are reported through :func:`drop`, so the build
can count them instead of losing them silently. The built-in converters are in :mod:`.formats`.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from ..errors import ConversionError, DataidxError, InvalidRow
from ..plugins import Registry
from .expansion import cuts, sample_problem, trains_nothing
from .samples import Sample

#: A raw row in, a standard :data:`~.samples.Sample` out. Typed to return any mapping, so a user's
#: converter that builds a plain dict registers without a cast; :func:`convert_row` checks it is a dict.
Converter = Callable[[dict[str, Any]], Mapping[str, Any]]

converters: Registry[Converter] = Registry("converter")
logger = logging.getLogger(__name__)
_drops: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("dataidx_drops", default=None)


def register_converter(name: str, *, version: str = "1") -> Callable[[Converter], Converter]:
    """Register a user converter under ``name``; refer to it from YAML as ``converter: name``.

    Example::

        @register_converter("qa", version="1")
        def qa(row):
            return {"messages": [
                {"role": "user", "content": [{"type": "text", "value": row["q"]}], "loss_weight": 0.0},
                {"role": "assistant", "content": [{"type": "text", "value": row["a"]}], "loss_weight": 1.0},
            ]}
    """
    return converters.register(name, version=version)


def drop(reason: str) -> None:
    """Record that a converter left part of a row out (v1 only logs a warning)."""
    collected = _drops.get()
    if collected is None:
        logger.warning(reason)
    else:
        collected.append(reason)


class collecting_drops:  # used as a function: ``with collecting_drops() as drops:``
    """Collect :func:`drop` reasons instead of logging them, for a build summary or a reader.
    A class, not a generator: readers enter it once per fetched row (1 us instead of 3.5)."""

    __slots__ = ("collected", "token")

    def __enter__(self) -> list[str]:
        self.collected: list[str] = []
        self.token = _drops.set(self.collected)
        return self.collected

    def __exit__(self, *exc_info: object) -> None:
        _drops.reset(self.token)


def present(row: dict[str, Any]) -> dict[str, Any]:
    """The row without null columns (the row itself when it has none): a column the loader
    filled with null counts as absent."""
    if None not in row.values():  # the common row: no copy
        return row
    return {key: value for key, value in row.items() if value is not None}


#: A converter's ``prefix``: the row converted only as far as its first ``cut`` messages.
PrefixConverter = Callable[[dict[str, Any], int], Mapping[str, Any]]


def convert_row(func: Converter | PrefixConverter, raw: dict[str, Any], dataset: str, row: int, converter: str,
                cut: int | None = None) -> Sample:
    """Run a converter on one row (its ``prefix`` with ``cut``); any failure becomes a
    ConversionError naming all three."""
    try:
        sample = cast(Converter, func)(raw) if cut is None else cast(PrefixConverter, func)(raw, cut)
    except InvalidRow as exc:
        raise ConversionError(dataset, row, converter, str(exc)) from exc
    except DataidxError:
        raise
    except KeyError as exc:
        raise ConversionError(dataset, row, converter, f"missing key {exc.args[0]!r}") from exc
    except Exception as exc:
        raise ConversionError(dataset, row, converter, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(sample, dict):
        raise ConversionError(dataset, row, converter, f"returned {type(sample).__name__}, expected a dict")
    return cast(Sample, sample)  # its roles and cuts are checked where they are used


def row_expansion(func: Converter, raw: dict[str, Any], dataset: str, row: int,
                  converter: str) -> tuple[list[int | None], bool]:
    """The cuts of one converted row and whether it trains nothing (:func:`expanded_row`)."""
    _, found, nothing = expanded_row(func, raw, dataset, row, converter)
    return found, nothing


def expanded_row(func: Converter, raw: dict[str, Any], dataset: str, row: int,
                 converter: str) -> tuple[Sample, list[int | None], bool]:
    """One converted row, its cuts and whether it trains nothing (:func:`.expansion.trains_nothing`);
    a sample not in the standard shape (:func:`.expansion.sample_problem`: a role outside
    :data:`.expansion.ROLES`, content that is not blocks) fails like a conversion. The build
    reads the sample's media blocks from it."""
    sample = convert_row(func, raw, dataset, row, converter)
    problem = sample_problem(sample)
    if problem is not None:
        raise ConversionError(dataset, row, converter, problem)
    try:
        found = cuts(sample)
    except Exception as exc:
        raise ConversionError(dataset, row, converter,
                              f"sample cannot be expanded: {type(exc).__name__}: {exc}") from exc
    return sample, found, trains_nothing(sample, found)

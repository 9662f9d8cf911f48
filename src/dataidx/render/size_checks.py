"""What a template's operations may make: sizes checked before ``*``, ``%``, format widths,
``center``/``ljust``/``zfill``, ``replace``, ``join``, ``sum`` and ``indent`` run, and every
growing filter's result after (the sandbox, :mod:`.sandbox`, calls these)."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Any

from .budget import Budget, OverBudget, current, length, ticking

#: str methods whose integer arguments are sizes of the string they make.
_WIDTHS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
#: filters whose integer arguments are sizes of what they make.
_SIZED_FILTERS = frozenset({"center", "indent", "wordwrap", "batch", "slice", "truncate", "tojson"})
#: filters whose result can outgrow what they are given, checked; the rest (trim, length, lower...) run as they are.
GROWING_FILTERS = _SIZED_FILTERS | {"format", "replace", "join", "sum", "pprint", "urlize", "xmlattr", "filesizeformat"}


def _check_ints(values: Iterable[Any], budget: Budget, what: str) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > budget.characters:
            budget.size(abs(value), what)


def _check_format(text: str, args: tuple[Any, ...], budget: Budget) -> None:
    """Widths and precisions of a ``str.format`` string (nested ``{}`` take them from arguments)."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return  # format raises it itself
    for _, _, spec, _ in fields:
        for run in "".join(c if c.isdigit() else " " for c in spec or "").split():
            budget.size(int(run), "asked for a width")
    _check_ints(args, budget, "asked for a width")


_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(text: str, right: Any, budget: Budget) -> None:
    """Widths and precisions of a ``%`` format (``*`` takes them from the arguments)."""
    for spec in _PRINTF.finditer(text):
        for size in spec.groups():
            if size and size != "*":
                budget.size(int(size), "asked for a width")
    _check_ints(right if isinstance(right, tuple) else (right,), budget, "asked for a width")


def _check_join(separator: str, items: Any, budget: Budget) -> None:
    if isinstance(items, (list, tuple)):
        total = len(separator) * max(0, len(items) - 1) + sum(length(item) for item in items)
        budget.size(total, "would make a string")


def check_call(obj: Any, args: tuple[Any, ...], budget: Budget) -> None:
    """Checks before a call whose result size its arguments decide (str methods, format)."""
    target = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
    owner = getattr(target, "__self__", None)
    if not isinstance(owner, str):
        return
    name = getattr(target, "__name__", "")
    if name in _WIDTHS:
        _check_ints(args, budget, "asked for a width")
    elif name in ("format", "format_map"):
        _check_format(owner, args, budget)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = owner.count(args[0]) if args[0] else len(owner) + 1
        budget.size(len(owner) + count * max(0, len(args[1]) - len(args[0])), "would make a string")
    elif name == "join" and args:
        _check_join(owner, args[0], budget)


def check_binop(name: str, left: Any, right: Any, budget: Budget) -> None:
    if name == "*":
        for sequence, times in ((left, right), (right, left)):
            if isinstance(times, int) and length(sequence):
                budget.size(length(sequence) * max(0, times), "would make a string or list")
    elif name == "%" and isinstance(left, str):
        _check_printf(left, right, budget)
    elif name == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
        budget.size(left.bit_length() * right // 8, "would make a number")


#: The widest JSON indent a template may ask for: every line of the output repeats it per level.
_JSON_INDENT = 64


def _check_indent(name: str, value: Any, *, rest: tuple[Any, ...], kwargs: dict[str, Any], budget: Budget) -> None:
    """``tojson(indent=)`` and ``indent(width)`` repeat their indent on every line they write."""
    width = kwargs.get("indent" if name == "tojson" else "width", rest[0] if rest else None)
    size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if name == "tojson":
        if size > _JSON_INDENT:
            raise OverBudget(f"the chat template asked for a JSON indent of {size} (at most {_JSON_INDENT})")
    elif isinstance(value, str):
        budget.size(len(value) + (value.count("\n") + 1) * size, "would make a string")


def sized_filter(name: str, function: Any) -> Any:
    """A filter whose size arguments are checked before it runs and whose result after."""

    passed = 1 if hasattr(function, "jinja_pass_arg") else 0  # a context or environment comes first

    def checked(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        value, rest = (args[passed], args[passed + 1:]) if len(args) > passed else (None, ())
        if name in _SIZED_FILTERS:
            _check_ints([*rest, *kwargs.values()], budget, "asked for a size")
        elif name == "format" and isinstance(value, str):
            _check_printf(value, tuple(rest) or tuple(kwargs.values()), budget)
        elif name == "replace" and len(rest) >= 2 and isinstance(value, str):
            check_call(value.replace, rest[:2], budget)
        elif name in ("join", "sum") and len(args) > passed:
            if not isinstance(value, (str, list, tuple, dict)):  # a generator: its items, counted first
                value = list(ticking(args[passed], budget))
                args = (*args[:passed], value, *rest)
            if name == "join":
                separator = rest[0] if rest else kwargs.get("d", "")
                _check_join(separator if isinstance(separator, str) else "", value, budget)
            elif isinstance(value, (list, tuple)):  # sum of lists concatenates them
                budget.size(sum(length(item) for item in value), "would make a list")
        if name in ("tojson", "indent"):
            _check_indent(name, value, rest=rest, kwargs=kwargs, budget=budget)
        result = function(*args, **kwargs)
        budget.size(length(result), f"made a value with filter '{name}'")
        return result

    if passed:  # a context or environment filter stays one
        checked.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]
    return checked

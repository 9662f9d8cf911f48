"""The sandbox chat templates run in: Hugging Face's, with a budget of time and characters.

A template is code from whoever made the tokenizer or the store (a crafted store's passes every
fingerprint check: the fingerprint is a public hash). Jinja's sandbox keeps it from Python, not
from running forever (nested loops, a macro calling itself twice) or allocating without end
(``'x' * 3000000000``, a string doubled in a loop). So checks are woven into its compiled code:

- time: each loop iteration, call and filter ticks; an entry past its seconds stops;
- characters: every piece of output (``{% set %}`` blocks and macros too) counts, and nothing may
  build a string or list past the budget: ``*``, ``%``, format widths, ``center``/``ljust``/
  ``zfill``, ``replace``, ``join``, ``sum``, ``indent`` are checked before they run; ``+``, ``~``
  and every filter's result right after. Jinja's ``lipsum`` (one uninterruptible call) is gone.

A breach is a :class:`~dataidx.errors.RenderError`: one entry's ``render_error``, never a hung or
killed process. ``scripts/bounds.py template`` measures both the stops and what the checks cost.
"""

from __future__ import annotations

import math
import operator
import re
import string
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import RenderError

#: The most seconds one entry's template text may take; a real template takes milliseconds.
TEMPLATE_SECONDS = 10.0
#: The most characters a template may write or build for one entry unless the renderer sets it.
TEMPLATE_CHARACTERS = 2**24
#: Ticks between two looks at the clock.
_EVERY = 64
_SIZED = frozenset({str, list, tuple, dict})
#: str methods whose integer arguments are sizes of the string they make.
_WIDTHS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
#: filters whose integer arguments are sizes of what they make.
_SIZED_FILTERS = frozenset({"center", "indent", "wordwrap", "batch", "slice", "truncate", "tojson"})


class OverBudget(RenderError):
    """A template went past its time or characters for one entry."""


class Budget:
    """What one render may still spend: a deadline, and characters of output."""

    def __init__(self, seconds: float, characters: int, deadline: float | None = None) -> None:
        self.seconds, self.characters = seconds, characters
        self.deadline = deadline if deadline is not None else time.monotonic() + seconds
        self.written = self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % _EVERY == 0:
            self.look()

    def look(self) -> None:
        """Stop the render when its time is up."""
        if time.monotonic() > self.deadline:
            raise OverBudget(f"the chat template ran past its budget of {self.seconds:g} s for one entry")

    def size(self, length: int, what: str) -> None:
        if length > self.characters:
            raise OverBudget(f"the chat template {what} of more than {self.characters} characters "
                             "(its budget for one entry)")


class _Current(threading.local):
    """Each thread's budget; outside any :func:`start` (a compiled template rendered directly),
    characters are bounded and time is not."""

    def __init__(self) -> None:
        self.budget = Budget(math.inf, TEMPLATE_CHARACTERS, deadline=math.inf)


_local = _Current()


def current() -> Budget:
    """The budget of the text being rendered in this thread."""
    return _local.budget


def start(seconds: float, characters: int, deadline: float | None = None) -> Budget:
    """A fresh budget for the next text rendered in this thread: its characters, and ``seconds``
    from now or until ``deadline`` (the texts of one entry share one)."""
    _local.budget = Budget(seconds, characters, deadline)
    return _local.budget


def _length(value: Any) -> int:
    return len(value) if value.__class__ in _SIZED else 0


def _written(context: Any, value: Any) -> str:
    """A piece of output, counted (untimed: outside loops and calls, pieces are as many as the template has)."""
    text = value if value.__class__ is str else str(value)
    budget = _local.budget
    budget.written += len(text)
    if budget.written > budget.characters:
        budget.size(budget.written, "wrote text")
    return text


def _made(context: Any, value: Any) -> Any:
    """A value just made (``~``), checked for its size."""
    current().size(_length(value), "made a string")
    return value


def _looped(context: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    """A loop's items, each one a tick."""
    budget = current()
    for item in iterable:
        budget.tick()
        yield item


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
        total = len(separator) * max(0, len(items) - 1) + sum(_length(item) for item in items)
        budget.size(total, "would make a string")


def _check_call(obj: Any, args: tuple[Any, ...], budget: Budget) -> None:
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


def _check_binop(name: str, left: Any, right: Any, budget: Budget) -> None:
    if name == "*":
        for sequence, times in ((left, right), (right, left)):
            if isinstance(times, int) and _length(sequence):
                budget.size(_length(sequence) * max(0, times), "would make a string or list")
    elif name == "%" and isinstance(left, str):
        _check_printf(left, right, budget)
    elif name == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
        budget.size(left.bit_length() * right // 8, "would make a number")


#: The widest JSON indent a template may ask for: every line of the output repeats it per level.
_JSON_INDENT = 64


def _check_indent(name: str, value: Any, rest: tuple[Any, ...], kwargs: dict[str, Any], budget: Budget) -> None:
    """``tojson(indent=)`` and ``indent(width)`` repeat their indent on every line they write."""
    width = kwargs.get("indent" if name == "tojson" else "width", rest[0] if rest else None)
    size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if name == "tojson":
        if size > _JSON_INDENT:
            raise OverBudget(f"the chat template asked for a JSON indent of {size} (at most {_JSON_INDENT})")
    elif isinstance(value, str):
        budget.size(len(value) + (value.count("\n") + 1) * size, "would make a string")


def _sized_filter(name: str, function: Any) -> Any:
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
            _check_call(value.replace, rest[:2], budget)
        elif name in ("join", "sum") and len(args) > passed:
            if not isinstance(value, (str, list, tuple, dict)):  # a generator: its items, counted first
                value = list(_looped(None, value))
                args = (*args[:passed], value, *rest)
            if name == "join":
                separator = rest[0] if rest else kwargs.get("d", "")
                _check_join(separator if isinstance(separator, str) else "", value, budget)
            elif isinstance(value, (list, tuple)):  # sum of lists concatenates them
                budget.size(sum(_length(item) for item in value), "would make a list")
        if name in ("tojson", "indent"):
            _check_indent(name, value, rest, kwargs, budget)
        result = function(*args, **kwargs)
        budget.size(_length(result), f"made a value with filter '{name}'")
        return result

    if passed:  # a context or environment filter stays one
        checked.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]
    return checked


def budgeted_environment(filters: dict[str, Any], functions: dict[str, Any], **options: Any) -> Any:
    """Hugging Face's sandboxed environment with its extra ``filters`` and global ``functions``,
    every template of which runs under :func:`current`."""
    from jinja2 import Template, nodes, pass_context  # here, not at import: only rendering needs Jinja
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "%", "**", "+"})

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(nodes.For):
                loop.iter = nodes.Filter(loop.iter, "dataidx_looped", [], [], None, None, lineno=loop.lineno)
            for output in tree.find_all(nodes.Output):
                output.nodes = [nodes.Filter(child, "dataidx_written", [], [], None, None, lineno=child.lineno)
                                for child in output.nodes]
            for concat in list(tree.find_all(nodes.Concat)):
                concat.nodes = [nodes.Filter(nodes.Concat(concat.nodes, lineno=concat.lineno), "dataidx_made", [], [],
                                             None, None, lineno=concat.lineno)]
            return tree

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's
            budget = _local.budget  # written for speed: every macro and method call runs it
            budget.ticks += 1
            if budget.ticks % _EVERY == 0:
                budget.look()
            if getattr(__obj, "__self__", None).__class__ is str or hasattr(__obj, "__wrapped__"):
                _check_call(__obj, args, budget)
            result = super().call(__context, __obj, *args, **kwargs)
            if result.__class__ in _SIZED and len(result) > budget.characters:
                budget.size(len(result), "made a value")
            return result

        def call_binop(self, context: Any, name: str, left: Any, right: Any) -> Any:
            if name == "+":  # the common one, checked after: at most twice the budget is ever held
                result = left + right
                if result.__class__ is str and len(result) > _local.budget.characters:
                    current().size(len(result), "made a string")
                elif result.__class__ is list:
                    current().size(len(result), "made a list")
                return result
            _check_binop(name, left, right, current())
            return _OPERATORS[name](left, right)

    class BudgetedTemplate(Template):
        def render(self, *args: Any, **kwargs: Any) -> str:
            """Rendered directly, not by ChatText: its own characters budget, and no deadline."""
            start(math.inf, TEMPLATE_CHARACTERS, deadline=math.inf)
            return super().render(*args, **kwargs)

    BudgetedEnvironment.template_class = BudgetedTemplate
    environment = BudgetedEnvironment(**options)
    environment.globals.pop("lipsum", None)
    environment.globals.update(functions)
    environment.filters = {name: _sized_filter(name, function)
                           for name, function in {**environment.filters, **filters}.items()}
    # Context filters are never folded into constants at compile time: each piece counts when written.
    environment.filters.update(dataidx_looped=pass_context(_looped), dataidx_written=pass_context(_written),
                               dataidx_made=pass_context(_made))
    return environment


_OPERATORS = {"*": operator.mul, "%": operator.mod, "**": operator.pow, "+": operator.add}

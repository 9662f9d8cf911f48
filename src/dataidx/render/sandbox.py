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
import types
from collections.abc import Iterable
from typing import Any

from .budget import SIZED, TEMPLATE_CHARACTERS, OverBudget, current, length, local, start, ticking
from .size_checks import GROWING_FILTERS, check_binop, check_call, sized_filter

#: The most seconds one entry's template text may take; a real template takes milliseconds.
TEMPLATE_SECONDS = 10.0
__all__ = ["TEMPLATE_CHARACTERS", "TEMPLATE_SECONDS", "OverBudget", "budgeted_environment", "current", "start",
           "written"]


def _written(context: Any, value: Any) -> str:
    """A piece of output, counted (untimed: outside loops and calls, pieces are as many as the template has)."""
    text = value if value.__class__ is str else str(value)
    budget = local.budget
    budget.written += len(text)
    if budget.written > budget.characters:
        budget.size(budget.written, "wrote text")
    return text


def written(pieces: Iterable[str]) -> str:
    """What a template yields, counted piece by piece as it comes, joined."""
    budget = local.budget
    room, total, kept = budget.characters - budget.written, 0, []
    append = kept.append
    for piece in pieces:
        total += len(piece)
        if total > room:
            budget.size(budget.written + total, "wrote text")
        append(piece)
    budget.written += total
    return "".join(kept)


def _joined(pieces: Iterable[str]) -> str:
    pieces = pieces if isinstance(pieces, list) else list(pieces)
    current().size(sum(map(len, pieces)), "would join text")
    return "".join(pieces)


def _made(context: Any, value: Any) -> Any:
    """A value just made (``~``), checked for its size."""
    current().size(length(value), "made a string")
    return value


#: Names a dict has as attributes (its methods): any other ``dict.name`` in a template is its key.
_DICT_NAMES = frozenset(dir(dict))
#: Types whose methods are called directly once looked up (the lookup is the sandbox's check).
_PLAIN = frozenset({str, dict, list, tuple, int, float})
#: Format methods, which the sandbox wraps on every lookup: never looked up directly.
_FORMATS = frozenset({"format", "format_map"})
_METHODS = (types.MethodType, types.BuiltinMethodType)
#: ``(type, name)`` the sandbox has judged safe to look up, looked up directly from then on.
_SAFE_NAMES: set[tuple[type, str]] = set()

#: A list this short is looped over as it is, its items ticked at once: a message loop pays nothing per item.
_SHORT = 64


def _looped(context: Any, iterable: Iterable[Any]) -> Iterable[Any]:
    """A loop's items, each one a tick."""
    budget = local.budget
    # Exactly a list or tuple (a subclass may count or loop otherwise); isinstance tells type checkers.
    if isinstance(iterable, (list, tuple)) and iterable.__class__ in (list, tuple) and len(iterable) <= _SHORT:
        budget.tick(len(iterable) + 1)
        return iterable
    return ticking(iterable, budget)


def budgeted_environment(filters: dict[str, Any], functions: dict[str, Any], **options: Any) -> Any:
    """Hugging Face's sandboxed environment with its extra ``filters`` and global ``functions``,
    every template of which runs under :func:`current`."""
    from jinja2 import Template, Undefined, nodes, pass_context  # here, not at import: only rendering needs Jinja
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "%", "**", "+"})

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(nodes.For):
                loop.iter = nodes.Filter(loop.iter, "dataidx_looped", [], [], None, None, lineno=loop.lineno)
            # What a buffer collects (macros, call, set and filter blocks) is counted piece by piece;
            # what the template yields is counted by whoever reads it (written(), the join).
            counted: set[int] = set()
            for block in tree.find_all((nodes.Macro, nodes.CallBlock, nodes.AssignBlock, nodes.FilterBlock)):
                for output in block.find_all(nodes.Output):
                    if id(output) not in counted:
                        counted.add(id(output))
                        output.nodes = [nodes.Filter(child, "dataidx_written", [], [], None, None, lineno=child.lineno)
                                        for child in output.nodes]
            for concat in list(tree.find_all(nodes.Concat)):
                concat.nodes = [nodes.Filter(nodes.Concat(concat.nodes, lineno=concat.lineno), "dataidx_made", [], [],
                                             None, None, lineno=concat.lineno)]
            return tree

        def getattr(self, obj: Any, attribute: str) -> Any:
            """Jinja's sandboxed lookup, sooner for what chat templates look up most. A message's key
            (``message.content``: a dict has no such attribute, so Jinja takes the key after failing
            to find one) is taken at once. Any other public name is judged by the sandbox once per
            type: its verdict depends only on the object's type and the name (``is_safe_attribute``
            reads neither the value nor the instance), so ``loop.last``, ``ns.index`` and
            ``content.strip`` are looked up directly from then on. A format method is always the
            sandbox's (it wraps them), and so is a name it refused."""
            kind = type(obj)
            if kind is dict and attribute not in _DICT_NAMES:
                try:
                    return obj[attribute]
                except KeyError:
                    return self.undefined(obj=obj, name=attribute)
            if (kind, attribute) in _SAFE_NAMES:
                try:
                    value = getattr(obj, attribute)
                except AttributeError:  # this instance lacks it (a namespace, an item): Jinja's way
                    return super().getattr(obj, attribute)
                if value.__class__ not in _METHODS or value.__name__ not in _FORMATS:
                    return value
            value = super().getattr(obj, attribute)
            if (attribute.__class__ is str and not attribute.startswith("_") and attribute not in _FORMATS
                    and not isinstance(value, Undefined)):
                _SAFE_NAMES.add((kind, attribute))
            return value

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # Jinja's signature
            budget = local.budget
            budget.tick()
            if getattr(__obj, "__self__", None).__class__ is str or hasattr(__obj, "__wrapped__"):
                check_call(__obj, args, budget)
            if (type(__obj) is types.BuiltinMethodType and type(__obj.__self__) in _PLAIN
                    and __obj.__name__ not in _FORMATS):
                # A plain value's method (``content.strip()``), which only a lookup the sandbox judged
                # safe can have given: called as Jinja's context would call it, without its checks.
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
                result = __obj(*args, **kwargs)
            else:
                result = super().call(__context, __obj, *args, **kwargs)
            if result.__class__ in SIZED and len(result) > budget.characters:
                budget.size(len(result), "made a value")
            return result

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:  # Jinja's names
            if operator == "+":  # the common one, checked after: at most twice the budget is ever held
                result = left + right
                if result.__class__ is str and len(result) > local.budget.characters:
                    current().size(len(result), "made a string")
                elif result.__class__ is list:
                    current().size(len(result), "made a list")
                return result
            check_binop(operator, left, right, current())
            return _OPERATORS[operator](left, right)

    class BudgetedTemplate(Template):
        def render(self, *args: Any, **kwargs: Any) -> str:
            """Rendered directly, not by ChatText: its own characters budget, and no deadline."""
            start(math.inf, TEMPLATE_CHARACTERS, deadline=math.inf)
            return super().render(*args, **kwargs)

    BudgetedEnvironment.template_class = BudgetedTemplate
    environment = BudgetedEnvironment(**options)
    # A buffer's pieces, and a direct render's, checked before they are joined. jinja2 declares concat
    # as "".join, whose LiteralString overload no function of str can match: hence the ignore.
    environment.concat = _joined  # pyright: ignore[reportAttributeAccessIssue]
    environment.globals.pop("lipsum", None)
    environment.globals.update(functions, namespace=_hf_namespace())
    environment.filters = {name: sized_filter(name, function) if name in GROWING_FILTERS else function
                           for name, function in {**environment.filters, **filters}.items()}
    # Context filters are never folded into constants at compile time: each piece counts when written.
    environment.filters.update(dataidx_looped=pass_context(_looped), dataidx_written=pass_context(_written),
                               dataidx_made=pass_context(_made))
    return environment


def _hf_namespace() -> type:
    """transformers' ``namespace``: Jinja's, refusing attribute names that start with ``_`` (a
    template that stores one fails under ``apply_chat_template``, so it fails here too)."""
    from jinja2.exceptions import SecurityError  # here, not at import: only rendering needs Jinja
    from jinja2.utils import Namespace

    def checked(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"chat templates cannot store underscore-prefixed attributes on a namespace ({name!r})")

    class HFNamespace(Namespace):
        def __init__(*args: Any, **kwargs: Any) -> None:  # Jinja's signature: self may be a keyword
            for name in dict(*args[1:], **kwargs):
                checked(name)
            Namespace.__init__(*args, **kwargs)

        def __setitem__(self, name: str, value: Any) -> None:
            checked(name)
            Namespace.__setitem__(self, name, value)

    return HFNamespace


_OPERATORS = {"*": operator.mul, "%": operator.mod, "**": operator.pow, "+": operator.add}

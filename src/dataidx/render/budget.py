"""A chat template's budget for one entry: a deadline and characters, and the error past them.

Kept apart from the sandbox (:mod:`.sandbox`) and the size checks (:mod:`.size_checks`) that
spend it, so each can be read alone.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import RenderError

#: The most characters a template may write or build for one entry unless the renderer sets it.
TEMPLATE_CHARACTERS = 2**24
#: Ticks between two looks at the clock.
EVERY = 64
SIZED = frozenset({str, list, tuple, dict})


class OverBudget(RenderError):
    """A template went past its time or characters for one entry."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args, cause="template_budget")


class Budget:
    """What one render may still spend: a deadline, and characters of output."""

    def __init__(self, seconds: float, characters: int, deadline: float | None = None) -> None:
        self.seconds, self.characters = seconds, characters
        self.deadline = deadline if deadline is not None else time.monotonic() + seconds
        self.written = self.ticks = 0

    def tick(self, count: int = 1) -> None:
        """``count`` units of work done; the clock is read once every :data:`EVERY` of them."""
        before = self.ticks
        self.ticks += count
        if before // EVERY != self.ticks // EVERY:
            self.look()

    def look(self) -> None:
        """Stop the render when its time is up."""
        if time.monotonic() > self.deadline:
            raise OverBudget(f"the chat template ran past its budget of {self.seconds:g} s for one entry")

    def size(self, length: int, what: str) -> None:
        if length > self.characters:
            raise OverBudget(f"the chat template {what} of more than {self.characters} characters "
                             "(its budget for one entry)")


def length(value: Any) -> int:
    """The size of a string, list, tuple or dict; 0 for anything else."""
    return len(value) if value.__class__ in SIZED else 0


def ticking(iterable: Iterable[Any], budget: Budget) -> Iterator[Any]:
    for item in iterable:
        budget.tick()
        yield item


class _Current(threading.local):
    """Each thread's budget; outside any :func:`start` (a compiled template rendered directly),
    characters are bounded and time is not."""

    def __init__(self) -> None:
        self.budget = Budget(math.inf, TEMPLATE_CHARACTERS, deadline=math.inf)


local = _Current()


def current() -> Budget:
    """The budget of the text being rendered in this thread."""
    return local.budget


def start(seconds: float, characters: int, deadline: float | None = None) -> Budget:
    """A fresh budget for the next text rendered in this thread: its characters, and ``seconds``
    from now or until ``deadline`` (the texts of one entry share one)."""
    local.budget = Budget(seconds, characters, deadline)
    return local.budget

"""A chat template rendered by minijinja (Rust), for the ``minijinja`` template engine.

It gets what Hugging Face's environment gives a template: ``trim_blocks``/``lstrip_blocks``,
Python's string and dict methods (minijinja's ``pycompat``), HF's ``tojson``, ``raise_exception``
and the spec's fixed clock. Its own limits bound a render: fuel (instructions) and the size of
what it may build. A render it cannot finish returns None, and the caller renders the text with
jinja2 in the sandbox instead: a template's errors and budgets read the same under either engine.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import RenderError
from .templates import tojson

#: Instructions one render may run: far past a real template's (a few thousand per message).
FUEL = 50_000_000


class MiniTemplate:
    """One template in minijinja."""

    def __init__(self, template_text: str, clock: str | None, characters: int) -> None:
        try:
            import minijinja  # here: an optional engine
        except ImportError:
            raise RenderError("the minijinja template engine is not installed (pip install 'dataidx[fast]')") from None

        def raise_exception(message: str) -> None:
            raise RenderError(str(message))

        now = datetime.fromisoformat(clock) if clock is not None else datetime.now()
        self.environment = minijinja.Environment(trim_blocks=True, lstrip_blocks=True, fuel=FUEL, pycompat=True,
                                                 filters={"tojson": tojson},
                                                 globals={"raise_exception": raise_exception,
                                                          "strftime_now": now.strftime})
        try:
            self.environment.add_template("chat", template_text)
        except minijinja.TemplateError as exc:
            raise RenderError(f"minijinja cannot compile this template: {str(exc).splitlines()[0]}") from None
        self.characters = characters
        self.errors: tuple[type[Exception], ...] = (minijinja.TemplateError, RenderError, ValueError, TypeError,
                                                    OverflowError, RecursionError)

    def render(self, variables: dict[str, Any]) -> str | None:
        """The text, or None where minijinja cannot write it within its limits (jinja2 then renders)."""
        try:
            text = self.environment.render_template("chat", **variables)
        except self.errors:
            return None
        return text if len(text) <= self.characters else None

"""Pieces every command shares: the library-error boundary, output helpers, option factories."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import DataidxError
from ..sampling import DEFAULT_SEED, SAMPLING_MODES

F = TypeVar("F", bound=Callable[..., Any])


class Group(click.Group):
    """Turns library errors into one line and exit 1, here and only here; bugs keep tracebacks."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataidxError as exc:
            raise click.ClickException(str(exc)) from None


def echo_json(document: Any) -> None:
    click.echo(json.dumps(document, ensure_ascii=False))


def table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A plain aligned text table, for people; ``--json`` is for programs."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def json_option(help_text: str = "Print one JSON document.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def mixture_options(func: F) -> F:
    """--seed and --sampling, shared by build and mix."""
    func = click.option(
        "--sampling", type=click.Choice(SAMPLING_MODES), default="exact", show_default=True,
        help="exact: distinct when shrinking, whole repeats when growing; replacement: v1's random.choices.",
    )(func)
    return click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the mixture.")(func)

"""The ``dataidx`` command line: thin click wrappers over the library (see :mod:`.app`)."""

from __future__ import annotations

import sys

import click

from ..errors import DataidxError
from ..plugins import load_entry_point_plugins
from .app import cli

__all__ = ["cli", "main"]


def main() -> None:
    """The console script: installed packages' plugins, then the command."""
    try:
        load_entry_point_plugins()
    except DataidxError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    cli(prog_name="dataidx")

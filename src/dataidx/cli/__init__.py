"""The ``dataidx`` command line: thin click wrappers over the library (see :mod:`.app`)."""

from __future__ import annotations

import signal
import sys
import threading

import click

from ..errors import DataidxError
from ..plugins import load_entry_point_plugins
from .app import cli
from .common import end_quietly_on_ctrl_c, interruptible_until_done

__all__ = ["cli", "main"]


def main() -> None:
    """The console script: installed packages' plugins, then the command."""
    try:
        load_entry_point_plugins()
    except DataidxError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    if threading.current_thread() is threading.main_thread():  # signals are the main thread's
        signal.signal(signal.SIGINT, interruptible_until_done)
    try:
        cli(prog_name="dataidx")
    finally:
        end_quietly_on_ctrl_c()  # the group did already, unless the command never ran

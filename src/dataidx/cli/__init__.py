"""The ``dataidx`` command line: thin click wrappers over the library.

Library errors (``DataidxError``) become one line on stderr and exit 1 at a single boundary
(:class:`common.Group`); anything else is a bug and keeps its traceback. Results go to stdout,
progress to stderr. Commands import their library modules when they run, so ``dataidx info``
never pays for datasets, torch or SQLAlchemy.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from .common import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dataidx")
def cli() -> None:
    """Build a persistent SQLite index of fine-tuning datasets once; read it from torch.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db
        dataidx info demo.db
    """


# Registered on import; the modules use `cli` from this package.
from . import read_commands, write_commands  # noqa: E402,F401


def main() -> None:
    cli(prog_name="dataidx")


if __name__ == "__main__":
    sys.exit(main())

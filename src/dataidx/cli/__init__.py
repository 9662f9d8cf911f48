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
@click.option("--plugins", "plugin_modules", multiple=True, metavar="MODULE",
              help="Import a module (or .py file) that registers converters or sources; repeatable.")
def cli(plugin_modules: tuple[str, ...]) -> None:
    """Build a persistent SQLite index of fine-tuning datasets once; read it from torch.

    STORE is a file, a sqlite:/// URL, or a postgresql://...?schema=NAME URL (a store a team
    shares; pip install 'dataidx[postgres]'). Converters and sources from installed packages (entry point group "dataidx.plugins") are
    loaded too; --plugins adds modules of your own.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db
        dataidx --plugins my_converters.py build my.yaml -o my.db
        dataidx info demo.db
    """
    if plugin_modules:
        from ..plugins import load_plugin_modules

        load_plugin_modules(list(plugin_modules))


# Registered on import; the modules use `cli` from this package.
from . import read_commands, write_commands  # noqa: E402,F401


def main() -> None:
    """The console script: installed packages' plugins, then the command."""
    from ..errors import DataidxError
    from ..plugins import load_entry_point_plugins

    try:
        load_entry_point_plugins()
    except DataidxError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    cli(prog_name="dataidx")


if __name__ == "__main__":
    sys.exit(main())

"""The ``dataidx`` command group and its one error boundary.

Library errors (``DataidxError``) become one line on stderr and exit 1 here, and only here;
anything else is a bug and keeps its traceback. Commands live in :mod:`.read_commands` and
:mod:`.write_commands` and import the library when they run, so ``dataidx info`` never pays
for datasets, torch or SQLAlchemy.
"""

from __future__ import annotations

import errno
import sqlite3
from typing import Any

import click

from .._version import __version__
from ..errors import DataidxError
from ..plugins import load_plugin_modules
from ..store import Bounds
from . import (
    evidence_commands,
    export_commands,
    order_commands,
    read_commands,
    render_commands,
    shard_commands,
    verify_commands,
    view_commands,
    write_commands,
)
from .common import end_quietly_on_ctrl_c, printable

#: What the machine, not dataidx, refuses: a full disk or quota, a file size limit, no permission,
#: a read-only file system, a missing folder. Any other OSError is a bug and keeps its traceback.
_ENVIRONMENT = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT,
                errno.ENOTDIR, errno.EISDIR}


class Group(click.Group):
    """Turns library errors into one line and exit 1, here and only here; bugs keep tracebacks."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataidxError as exc:
            raise click.ClickException(printable(str(exc))) from None
        except sqlite3.OperationalError as exc:  # a read SQLite stopped: its deadline passed, or Ctrl-C
            stopped = Bounds.stopped(exc)
            if stopped is None:
                raise
            if isinstance(stopped, KeyboardInterrupt):
                raise stopped from None
            raise click.ClickException(printable(str(stopped))) from None
        except OSError as exc:
            if exc.errno not in _ENVIRONMENT:
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(printable(f"{where}{exc.strerror or exc}")) from None
        finally:
            end_quietly_on_ctrl_c()  # the command is over: what is left to print says so


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dataidx")
@click.option("--plugins", "plugin_modules", multiple=True, metavar="MODULE",
              help="Import a module (or .py file) that registers converters or sources; repeatable.")
def cli(plugin_modules: tuple[str, ...]) -> None:
    """Build a persistent SQLite index of fine-tuning datasets once; read it from torch.

    STORE is a file, a sqlite:/// URL, or a postgresql://...?schema=NAME URL (a store a team
    shares; pip install 'dataidx[postgres]'). Converters and sources from installed packages
    (entry point group "dataidx.plugins") are loaded too; --plugins adds modules of your own.

    \b
    Example:
        dataidx build data/demo_sft.yaml -o demo.db
        dataidx --plugins my_converters.py build my.yaml -o my.db
        dataidx info demo.db
    """
    if plugin_modules:
        load_plugin_modules(list(plugin_modules))


for _command in (*write_commands.COMMANDS, *render_commands.COMMANDS, *shard_commands.COMMANDS, *read_commands.COMMANDS,
                 *verify_commands.COMMANDS, *export_commands.COMMANDS, *view_commands.COMMANDS,
                 *order_commands.COMMANDS, *evidence_commands.COMMANDS):
    cli.add_command(_command)

"""``dataidx serve``: a store in Datasette, the tool people already use to browse SQLite.

The store is opened immutable (read-only, no locks), on 127.0.0.1, under the file's stem (``demo``
for ``demo.db``; ``store`` for a stem that is not a plain name), kept to itself by :mod:`.guard`,
with metadata that says what every table and view holds and the cookbook of docs/sql.md as
canned queries (both the store's own: :mod:`dataidx.store` alone names its tables).
"""

from __future__ import annotations

import errno
import html
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import UsageError
from ..store import COOKBOOK, DESCRIPTIONS, Bounds, open_store, store_location
from .errors_page import quiet_errors
from .guard import loopback_only, read_functions_only, served_name, store_database


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60]


#: The views, in the order of docs/sql.md: what the home page links first.
VIEWS = ("entries", "composition", "token_composition", "turns", "repeats", "rejects", "entry_lengths", "pack_plans",
         "pack_members", "token_files", "skips", "trimmed", "order_steps",
         "mixture_positions")


def _home(database: str) -> str:
    """The home page's description: a link to each view (the stable interface) before the tables."""
    # A link names the database the way Datasette's URLs spell it; Datasette is optional (dataidx[web]).
    from datasette.utils import tilde_encode

    links = "".join(f"<li><a href='/{tilde_encode(database)}/{view}'>{view}</a>: {html.escape(DESCRIPTIONS[view])}</li>"
                    for view in VIEWS)
    return (f"<p>A dataidx {__version__} store, read-only. The views are the stable interface (docs/sql.md); "
            f"the canned queries are its cookbook; the tables are described in docs/store.md.</p><ul>{links}</ul>"
            f"<p><a href='/{tilde_encode(database)}'>Every table, view and canned query</a></p>")


def datasette_metadata(database: str) -> dict[str, Any]:
    """Datasette metadata for a store served under the name ``database``."""
    return {
        "title": "dataidx store",
        "description_html": _home(database),
        "databases": {database: {
            "tables": {name: {"description": text} for name, text in DESCRIPTIONS.items()},
            "queries": {_slug(title): {"title": title, "sql": sql} for title, sql in COOKBOOK},
        }},
    }


def _bound(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:``port`` for the server, or a UsageError naming the port."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(("127.0.0.1", port))
    except OSError as error:
        listening.close()
        why = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be opened ({error.strerror})"
        raise UsageError(f"port {port} on 127.0.0.1 {why}; choose another with --port") from None
    return listening


def datasette_app(location: Path, port: int) -> Any:
    """The ASGI app ``dataidx serve`` runs: Datasette over the one store file at ``location``,
    immutable, its SQL limited to the functions a read needs, answering only 127.0.0.1:``port``."""
    from datasette.app import Datasette  # the extra dataidx[web] brings Datasette and its server
    from datasette.plugins import pm

    for plugin in (quiet_errors(), read_functions_only()):
        if not pm.is_registered(plugin):
            pm.register(plugin, name=plugin.__name__)
    name = served_name(location)
    datasette = Datasette(metadata=datasette_metadata(name), settings={"sql_time_limit_ms": 5000})
    datasette.remove_database("_memory")  # a database Datasette adds when given no files: not ours to serve
    datasette.add_database(store_database(datasette, location), name=name)
    return loopback_only(datasette.app(), port)


def serve_store(store: str | os.PathLike[str], port: int = 8001, announce: Callable[[str], None] | None = None) -> None:
    """Serve the store file ``store`` with Datasette on 127.0.0.1:``port`` until interrupted;
    ``announce(url)`` is called once the store is known good and the port is ours, before the
    server starts. Each request Datasette refuses (a write, bad SQL) is one line on stderr."""
    location = store_location(store)
    if not isinstance(location, Path):
        raise UsageError(f"{store}: dataidx serve shows a store file; a PostgreSQL store is served by any "
                         "PostgreSQL client (see docs/postgres.md)")
    open_store(location).close()  # a dataidx store of a revision this dataidx reads, or a clear error
    try:
        import uvicorn  # here, not at import: the extra dataidx[web] brings Datasette and its server
        from datasette.utils import tilde_encode
    except ImportError:
        raise UsageError("dataidx serve needs Datasette: pip install 'dataidx[web]'") from None
    listening = _bound(port)
    app = datasette_app(location, port)
    if announce is not None:
        announce(f"http://127.0.0.1:{port}/{tilde_encode(served_name(location))}")  # as Datasette spells names
    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # The first Ctrl-C stops the server: uvicorn would wait for the requests in flight
            # (a second Ctrl-C forces it), and their statements, in Datasette's threads, are
            # stopped at their next step rather than run to their end.
            super().handle_exit(sig, frame)
            self.force_exit = True
            Bounds.interrupt()

    server = Server(uvicorn.Config(app, log_level="warning", access_log=False))
    with listening:
        server.run(sockets=[listening])

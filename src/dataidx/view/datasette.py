"""``dataidx serve``: a store in Datasette, the tool people already use to browse SQLite.

The store is opened immutable (read-only, no locks), on 127.0.0.1, under the file's stem (``demo``
for ``demo.db``; ``store`` for a stem that is not a plain name), kept to itself by :mod:`.guard`,
with metadata that says what every table and view holds and the cookbook of docs/sql.md as
canned queries.
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
from ..store import COOKBOOK, check_store, interrupt_statements, store_location
from .errors_page import quiet_errors
from .guard import loopback_only, read_functions_only, served_name, store_database

#: One line per table and view of a store: what one row is.
DESCRIPTIONS = {
    # views: the stable interface (docs/sql.md)
    "entries": "One row per position of a mixture: the (dataset, row, cut) it serves, and its epoch.",
    "composition": "One row per dataset of a mixture: entries, distinct rows and share.",
    "turns": "One row per source row of the base index: its entries (supervised turns) and last cut.",
    "repeats": "One row per distinct entry of a mixture: how many positions repeat it.",
    "rejects": "One row per source row a build left out under on_error: skip, with the reason.",
    "entry_lengths": "One row per base entry under a render spec: tokens, supervised tokens, status and why.",
    "pack_plans": "One row per packing plan: capacity, seed, packs, fill and positions left out.",
    "pack_members": "One row per member of a pack: the mixture position it holds, its tokens and epoch.",
    "token_composition": "One row per dataset and epoch of a mixture drawn under a spec: training entries, "
                         "tokens, supervised tokens and share of tokens.",
    "mixture_positions": "Every position of every mixture with its base entry, runs expanded.",
    "token_files": "One row per render spec whose tokens are stored: its token file, tokens, bytes per token.",
    "skips": "One row per entry a skip list leaves out of a mixture's training orders: who asked, why, and what.",
    "trimmed": "One row per entry the tail of an epoch of a recorded order (dataidx order) leaves out.",
    "order_steps": "One row per entry of each step of a recorded order stored with dataidx order --store-steps.",
    "cut_merges": "Per epoch of a plan made with dataidx pack --merge-cuts: conversations merged, as trees, or kept "
                  "as cuts and why, with the tokens they forward either way.",
    # tables (docs/store.md)
    "datasets": "One row per dataset of the YAML: source, converter, counts and source file fingerprints.",
    "base_entries": "The base index: one (dataset, row, cut) per supervised turn, in source order.",
    "builds": "One row per build: when, from which config, by which dataidx, in how long.",
    "mixtures": "One row per mixture: seed, sampling mode, entry count and the config it came from.",
    "mixture_datasets": "One row per dataset of a mixture: its seed, size, weight, and entries requested and drawn.",
    "mixture_runs": "Whole-dataset stretches of a mixture: positions start.. hold entries first_entry..",
    "mixture_entries": "Positions of a mixture that are not in a run, one row each.",
    "mixture_epochs": "One row per epoch of a mixture: its seed and stretch of positions.",
    "mixture_spans": "Ranges of base entries a mixture uses in some epoch (first_entry.., within one dataset); "
                     "the entries between them it never uses.",
    "repeat_counts": "Per mixture and dataset, how many rows the mixture draws each number of times over its "
                     "epochs (a row's times are its most drawn entry's).",
    "repeat_rows": "Per mixture, dataset and times, the first 100 rows drawn that many times: the rows that repeat "
                   "most, without expanding positions.",
    "dataset_turns": "Per dataset, how many rows have each number of entries (supervised turns), counted at "
                     "build time.",
    "epoch_datasets": "One row per dataset and epoch of a mixture: its seed, counts and, under the mixture's "
                      "spec, training entries and tokens.",
    "plan_epochs": "One row per epoch of a packing plan: its seed, packs and fill.",
    "rejected_rows": "Rows a build left out, with dataset, row and reason.",
    "render_specs": "One row per render spec: tokenizer, template, cutoff, truncation and fingerprint.",
    "entry_renders": "One row per base entry and spec: tokens, supervised tokens, status (see entry_lengths).",
    "spec_tokens": "One row per render spec whose tokens are stored (see token_files).",
    "skip_lists": "One row per skip list of a mixture (dataidx skip): who, why, what was asked, entries.",
    "skipped_entries": "One row per base entry of a skip list (see skips).",
    "training_orders": "One row per recorded run order: what it reads, seed, global batch, tail, steps per epoch.",
    "order_trims": "One row per base entry an epoch's tail of a recorded order trims (see trimmed).",
    "order_items": "One row per entry of a step of a recorded order (see order_steps).",
    "render_statuses": "Per render spec, dataset and status, the entries and the longest (full_tokens): "
                       "entry_lengths grouped once, when the spec is written.",
    "render_blocks": "Per render spec and block of 256 base entries (and dataset), the entries that train and "
                     "their tokens: a mixture's runs sum whole blocks.",
    "length_chunks": "Per render spec and 2**20 base entries, their tokens and supervised_tokens as arrays "
                     "(4 bytes an entry, little-endian length << 1 | trains): what pack reads.",
    "render_causes": "Per render spec and cause, the base entries that do not train for it and the first of them.",
    "added_token_uses": "Per spec and dataset, the entries whose data text holds an added token that is not "
                        "special (Qwen's <tool_call>): trained as its id, as LLaMA-Factory v1 does.",
    "packing_plans": "One row per packing plan (see pack_plans).",
    "packs": "One row per pack of a plan: its first member and how many.",
    "packed_entries": "One row per member of every pack, in slot order (joined: trained as one sequence with the "
                      "next, --merge-cuts).",
    "plan_merges": "Per epoch and outcome of a plan made with --merge-cuts, its conversations (see cut_merges).",
    "alembic_version": "The schema revision of the store (dataidx migrate upgrades it).",
}


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
    check_store(location)  # a dataidx store of a revision this dataidx reads, or a clear error
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
            interrupt_statements()

    server = Server(uvicorn.Config(app, log_level="warning", access_log=False))
    with listening:
        server.run(sockets=[listening])

"""What ``dataidx serve`` keeps out: functions a read does not need, other hosts, other files.

- Every connection Datasette opens gets an authorizer that refuses any function outside the list
  ``dataidx query`` allows (``fts3_tokenizer`` hands out a library address and takes a pointer);
  the store is immutable, so nothing else a statement does can change it.
- A request whose ``Host`` is not the loopback address and port served is answered 421 with one
  line on stderr: a web page whose name was rebound to 127.0.0.1 (DNS rebinding) would otherwise
  read the whole store through the user's browser. A request another site's page makes the
  browser send (an ``<img>``, a script, a frame; ``Sec-Fetch-Site``) is answered 403: any page
  could otherwise keep the server's threads busy with queries. A link followed is answered.
- Every connection runs its statements bounded (``dataidx.store.sqlite.bounds``: values, the
  work of one call, an answer's memory, the time limit looked at often).
- The store is opened by a ``file:`` URI built from its quoted absolute path (Datasette pastes
  the path into one, so ``#`` or ``?`` in a name opened another file), under a name Datasette
  cannot mistake for one of its own databases.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any

from ..store import Bounds

Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[dict[str, Any]], Awaitable[None]]],
                Awaitable[None]]


def _functions_only(action: int, _first: str | None, second: str | None, *_rest: Any) -> int:
    """An authorizer that refuses a function a read does not need and leaves the rest to
    Datasette (it reads the schema with PRAGMAs) and to the immutable file."""
    return sqlite3.SQLITE_DENY if Bounds.refused(action, second) else sqlite3.SQLITE_OK


@cache
def read_functions_only() -> Any:
    """The Datasette plugin that puts the authorizer on each connection (registered once)."""
    from datasette import hookimpl  # Datasette is the optional extra dataidx[web]

    class ReadFunctionsOnly:
        __name__: str  # set on the instance: Datasette lists its plugins by module name

        @hookimpl
        def prepare_connection(self, conn: sqlite3.Connection, database: str, datasette: Any) -> None:
            conn.set_authorizer(_functions_only)

    plugin = ReadFunctionsOnly()
    plugin.__name__ = "dataidx-read-functions-only"
    return plugin


def loopback_only(app: Asgi, port: int) -> Asgi:
    """``app`` answering only requests addressed to 127.0.0.1:``port`` (or localhost:``port``),
    and, of those a browser sends for another site's page, only its links (a page's ``<img>``,
    script or frame could send any query, as often as it likes)."""
    allowed = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}

    async def guarded(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await app(scope, receive, send)
        headers = dict(scope.get("headers", ()))
        host = headers.get(b"host", b"")
        if host.lower() not in allowed:
            shown = host.decode("latin-1").encode("unicode_escape").decode("ascii")[:80]
            return await _refuse(scope, send, 421, f"Host '{shown}' is not 127.0.0.1:{port}",
                                 f"Misdirected Request: this server answers only http://127.0.0.1:{port}/")
        # Sec-Fetch-* are set by the browser, not by the page: a link followed is a navigation
        # to a document; what a page loads by itself is anything else.
        if headers.get(b"sec-fetch-site", b"none") in (b"cross-site", b"same-site") and (
                headers.get(b"sec-fetch-mode"), headers.get(b"sec-fetch-dest")) != (b"navigate", b"document"):
            return await _refuse(scope, send, 403, "sent by another site's page",
                                 "Forbidden: this server answers another site's page only when a link is followed")
        return await app(scope, receive, send)

    return guarded


async def _refuse(scope: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[None]], status: int,
                  why: str, body: str) -> None:
    """Answer ``status`` with ``body`` (a websocket is closed), and say why in one line on stderr."""
    print(f"dataidx serve: refused {scope.get('method', 'GET')} {scope.get('path', '')[:80]} ({status}): {why}",
          file=sys.stderr, flush=True)
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    text = f"{status} {body}\n".encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(text)).encode())]})
    await send({"type": "http.response.body", "body": text})


def served_name(path: Path) -> str:
    """The database name a store is served under: its file's stem where that is a plain name,
    ``store`` where it is not (or where it would be one of Datasette's own, ``_internal``)."""
    stem = path.stem
    return stem if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", stem) else "store"


def store_database(datasette: Any, path: Path) -> Any:
    """A Datasette database of the one file at ``path``, immutable, opened by a quoted URI."""
    from datasette.database import Database  # Datasette is the optional extra dataidx[web]

    uri = f"{path.resolve().as_uri()}?immutable=1"  # as_uri quotes '#', '?' and '%'

    class StoreFile(Database):
        def connect(self, write: bool = False) -> sqlite3.Connection:
            if write:
                raise sqlite3.OperationalError("the store is served read-only")
            connection = Bounds.open(uri)  # every statement bounded, Datasette's own and the user's
            self._all_file_connections.append(connection)
            return connection

    return StoreFile(datasette, path=str(path), is_mutable=False)

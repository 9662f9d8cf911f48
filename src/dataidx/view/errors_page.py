"""How ``dataidx serve`` answers a request Datasette refuses or fails: one line on stderr.

Datasette's own handler prints a traceback with every local variable (through ``rich``) for each
refused request, a screenful for a write the read-only store turned away. This Datasette plugin
wraps that hook: the answer the browser gets is the same error page (or JSON), and the
terminal gets one line saying what was asked and why it was refused.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

#: The longest request path a refusal line shows.
_SHOWN = 160


def _one_line(text: str) -> str:
    """``text`` as one printable line: controls a terminal would act on are escaped, long text cut."""
    line = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text)
    return line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "..."


@cache
def quiet_errors() -> Any:
    """The plugin (one object, registered once per process by serve_store)."""
    # Datasette is the optional extra dataidx[web]: imported only when a store is served.
    from datasette import Response, hookimpl
    from datasette.utils.asgi import Base400
    from datasette.views.base import DatasetteError
    from markupsafe import Markup

    def answer(datasette: Any, request: Any, exception: BaseException) -> Any:
        async def respond() -> Any:
            title = None
            if isinstance(exception, Base400):
                status, message = exception.status, str(exception.args[0] if exception.args else exception)
            elif isinstance(exception, DatasetteError):
                status, message, title = exception.status, exception.message, exception.title
            else:
                status, message = 500, f"{type(exception).__name__}: {exception}"
            what = "refused" if status < 500 else "failed"
            path = request.path + (f"?{request.query_string}" if request.query_string else "")
            print(_one_line(f"dataidx serve: {what} {request.method} {path} ({status}): {message}"),
                  file=sys.stderr, flush=True)
            shown = Markup(message) if getattr(exception, "message_is_html", False) else message
            info = {"ok": False, "error": shown, "status": status, "title": title}
            if request.path.endswith(".json"):
                return Response.json({**info, "error": message}, status=status)
            template = datasette.jinja_env.select_template([f"{status}.html", "error.html"])
            return Response.html(await template.render_async(dict(
                info, urls=datasette.urls, app_css_hash=datasette.app_css_hash(), menu_links=lambda: [])),
                status=status)

        return respond

    class QuietErrors:
        __name__: str  # set on the instance: Datasette lists its plugins by module name

        @hookimpl(wrapper=True)
        def handle_exception(self, datasette: Any, request: Any, exception: BaseException) -> Any:
            # The other handlers return functions Datasette would call and await (the default one
            # prints a traceback with its locals there): dropped uncalled; this one answers instead.
            yield
            return [answer(datasette, request, exception)]

    plugin = QuietErrors()
    plugin.__name__ = "dataidx-quiet-errors"
    return plugin

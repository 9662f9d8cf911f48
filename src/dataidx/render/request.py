"""What ``dataidx render`` is asked to do, as one value: :class:`RenderRequest`.

A request is plain data (paths, numbers, names), so it can be logged, compared, and later sent
to the processes or machines that render a share of it; what is not data (a tokenizer already
loaded, a progress callback) is passed to :func:`.lengths.render_store` beside it.
"""

from __future__ import annotations

import os
from dataclasses import KW_ONLY, dataclass


@dataclass(frozen=True)
class RenderRequest:
    """Render every base entry of ``store`` with ``tokenizer`` and store the lengths and statuses
    under spec ``name``.

    A template that reads the clock (``strftime_now``) renders at ``clock`` (ISO 8601), or at the
    time spec ``name`` recorded when it was first rendered, or now. ``escapes`` says which tokens
    data text may not produce as ids (:mod:`.escape`): ``special`` (v1's) or ``added`` (every
    added token). ``jobs`` is processes (default: all cores). ``trust_remote_code`` lets a tokenizer
whose folder holds its own class (``auto_map``) be loaded, running that code; the spec records it,
and every later load of its tokenizer must be given it again.

    ``store_tokens`` also writes every training entry's words to the spec's token file (in
    ``tokens_dir``, default ``<store>.tokens``); a spec rendered another way is replaced only with
    ``replace`` if plans, stored tokens or token-budget mixtures were made from its lengths.

    Example::

        RenderRequest("demo.db", "models/tiny", cutoff=4096, template="chatml", truncation="right")
    """

    store: str | os.PathLike[str]
    #: the tokenizer's folder (or ``tokenizer.json``): the spec records it, and readers load it from there
    tokenizer: str | os.PathLike[str]
    _: KW_ONLY
    cutoff: int
    template: str | None = None
    truncation: str = "drop"
    name: str = "default"
    jobs: int | None = None
    clock: str | None = None
    escapes: str = "special"
    store_tokens: bool = False
    tokens_dir: str | os.PathLike[str] | None = None
    replace: bool = False
    trust_remote_code: bool = False

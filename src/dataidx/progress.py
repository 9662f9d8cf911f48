"""The two shapes of progress callback a long step takes, each with one name.

A step that counts its work (rendering entries, exporting samples, gathering a report) calls
``progress(done, total)`` as the count grows; a step of a few named phases (a build loading each
dataset, publishing into PostgreSQL) calls ``progress(message)`` as each phase begins. The CLI
passes a ``ProgressLine`` for the first and a line on stderr for the second.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(done, total)``: how much of a counted step is done.
CountProgress = Callable[[int, int], None]
#: ``progress(message)``: the phase a step is starting, in words.
MessageProgress = Callable[[str], None]

"""The report's figures over a mixture's positions: each one SQL aggregate, so a report of millions
of entries takes seconds and flat memory. Every figure counts positions (a repeated entry as often
as it is drawn), over every epoch of the mixture or over some.

A mixture stores runs of consecutive base entries as one row (``mixture_runs``) and scattered
positions one by one (``mixture_entries``). :data:`SPANS` reads the positions of the chosen
epochs as ranges of base entry ids, each tagged with its epoch, so a figure is a range join
of a few rows per run rather than a row per position. The figures join those ranges to base
entries, datasets and a spec's lengths, which is why they live here, beside every noun they read,
and not in the report (``dataidx.view``). The SQL reads the same in SQLite and PostgreSQL (no
braces: the templates go through :meth:`Dialect.sql`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .handle import StoreHandle
from .specs.reasoning import REASONING_PROBLEM_SUMS

#: ``spans(epoch, lo, hi)``: the chosen positions as inclusive ranges of base entry ids. A run is
#: clipped to the epochs' stretch, so a run is never counted outside the epochs asked for.
SPANS = """WITH chosen AS (
    SELECT epoch, start AS lo, start + entries - 1 AS hi FROM mixture_epochs
    WHERE mixture_id = {mark} AND epoch BETWEEN {mark} AND {mark}
),
spans AS (
    SELECT c.epoch AS epoch, r.first_entry + CASE WHEN c.lo > r.start THEN c.lo - r.start ELSE 0 END AS lo,
           r.first_entry + CASE WHEN c.hi < r.start + r.length - 1 THEN c.hi - r.start ELSE r.length - 1 END AS hi
    FROM chosen AS c JOIN mixture_runs AS r
      ON r.mixture_id = {mark} AND r.start <= c.hi AND r.start + r.length - 1 >= c.lo
    UNION ALL
    SELECT c.epoch, e.entry_id, e.entry_id FROM chosen AS c JOIN mixture_entries AS e ON e.id BETWEEN c.lo AND c.hi
)
"""

#: Rows the positions draw, by the entries (supervised turns) each row has in the base index.
TURNS = """, drawn AS (
    SELECT DISTINCT b.dataset_id AS dataset_id, b.row AS row FROM spans CROSS JOIN base_entries AS b
    WHERE b.id BETWEEN spans.lo AND spans.hi
),
counted AS (
    SELECT b.dataset_id AS dataset_id, b.row AS row, count(*) AS turns FROM base_entries AS b
    JOIN drawn AS w ON w.dataset_id = b.dataset_id AND w.row = b.row GROUP BY b.dataset_id, b.row
)
SELECT d.name, c.turns, count(*) FROM counted AS c JOIN datasets AS d ON d.id = c.dataset_id
GROUP BY d.position, d.name, c.turns ORDER BY d.position, c.turns
"""

#: Positions by epoch, dataset, status and length bin under a spec: every length figure is a sum of these.
LENGTH_GROUPS = """
SELECT spans.epoch, d.name, l.status, l.full_tokens / {mark} AS bin, count(*), sum(l.tokens),
       sum(l.supervised_tokens), min(l.detail)
FROM spans CROSS JOIN entry_renders AS l CROSS JOIN datasets AS d
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi
  AND l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1
GROUP BY spans.epoch, d.position, d.name, l.status, bin ORDER BY spans.epoch, d.position, l.status, bin
"""

#: The longest entry the positions draw under a spec (the histogram's range).
LONGEST = """
SELECT max(l.full_tokens) FROM spans CROSS JOIN entry_renders AS l
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi
"""

#: Distinct entries drawn that do not train, most often drawn first, with how often.
NOT_TRAINING = """
SELECT d.name, b.row, b.cut, l.status, l.full_tokens, l.detail, count(*) AS drawn
FROM spans CROSS JOIN entry_renders AS l CROSS JOIN base_entries AS b CROSS JOIN datasets AS d
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi AND l.status NOT IN ({trains})
  AND b.id = l.entry_id AND d.id = b.dataset_id
GROUP BY l.entry_id, d.name, b.row, b.cut, l.status, l.full_tokens, l.detail
ORDER BY drawn DESC, l.entry_id LIMIT {mark}
"""

#: How many distinct entries drawn do not train.
NOT_TRAINING_COUNT = """
SELECT count(DISTINCT l.entry_id) FROM spans CROSS JOIN entry_renders AS l
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi AND l.status NOT IN ({trains})
"""

#: Per dataset, the positions that train with reasoning and without, their tokens, and the
#: reasoning problems among them (``entry_renders.reasoning``).
REASONING_GROUPS = """
SELECT d.name, count(l.reasoning), sum(CASE WHEN l.reasoning IS NULL THEN 0 ELSE l.tokens END),
       count(*) - count(l.reasoning), sum(CASE WHEN l.reasoning IS NULL THEN l.tokens ELSE 0 END)""" + \
    REASONING_PROBLEM_SUMS + """
FROM spans CROSS JOIN entry_renders AS l CROSS JOIN datasets AS d
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN spans.lo AND spans.hi AND l.status IN ({trains})
  AND l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1
GROUP BY d.position, d.name ORDER BY d.position
"""


@dataclass(frozen=True)
class PositionFigures:
    """The report's reads over the positions of mixture ``mixture_id`` in epochs ``first..last``.

    Example::

        with open_store("demo.db") as handle:
            PositionFigures(handle, mixture_id=1, first=0, last=0).turns()
    """

    handle: StoreHandle
    mixture_id: int
    first: int
    last: int

    def _over(self, sql: str, *parameters: Any) -> list[tuple]:
        """Rows of ``sql`` (which reads ``spans``); ``parameters`` follow the spans' own."""
        return self.handle.all(SPANS + sql, self.mixture_id, self.first, self.last, self.mixture_id, *parameters)

    def turns(self) -> list[tuple[str, int, int]]:
        """``(dataset, turns, rows)``: the rows drawn, by their entries in the base index."""
        return self._over(TURNS)

    def longest(self, spec_id: int) -> int:
        """The longest entry drawn under the spec (``full_tokens``), 0 for none."""
        return self._over(LONGEST, spec_id)[0][0] or 0

    def length_groups(self, spec_id: int, width: int) -> list[tuple]:
        """``(epoch, dataset, status, bin, positions, tokens, supervised_tokens, detail)``, bins of ``width``."""
        return self._over(LENGTH_GROUPS, width, spec_id)

    def not_training(self, spec_id: int, listed: int) -> list[tuple]:
        """The ``listed`` distinct entries drawn most often that do not train under the spec."""
        return self._over(NOT_TRAINING, spec_id, listed)

    def not_training_count(self, spec_id: int) -> int:
        """How many distinct entries drawn do not train under the spec."""
        return self._over(NOT_TRAINING_COUNT, spec_id)[0][0]

    def reasoning(self, spec_id: int) -> list[tuple]:
        """Per dataset, the trained positions with and without reasoning, their tokens, and each
        problem's count (see :data:`REASONING_GROUPS`)."""
        return self._over(REASONING_GROUPS, spec_id)

"""The sizes and SQL of a store's summary rows, shared by the writers that store them
(:mod:`.render_summaries`, :mod:`.sqlite.draws`) and the checks that count them again
(:mod:`.summary_checks`). No SQLAlchemy here: a reader that checks a store loads none."""

from __future__ import annotations

#: Rows kept per (mixture, dataset, times) in ``repeat_rows``.
REPEAT_ROWS = 100
#: Base entries per ``render_blocks`` block (the cookbook's SQL spells it out).
BLOCK_ENTRIES = 256

# Templates in the Dialect style (``{mark}``: the spec's id). The datasets join by range: an
# entry's dataset from the handful of datasets rows, not a base_entries lookup per entry.
# ``verify`` recounts them with the same SELECTs.
STATUS_COUNTS = """
SELECT l.spec_id, d.id, l.status, count(*), max(l.full_tokens)
FROM entry_renders AS l CROSS JOIN datasets AS d
WHERE l.spec_id = {mark} AND l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1
GROUP BY l.spec_id, d.id, l.status
"""
BLOCK_SUMS = f"""
SELECT l.spec_id, l.entry_id / {BLOCK_ENTRIES}, d.id, count(*), sum(l.tokens), sum(l.supervised_tokens)
FROM entry_renders AS l CROSS JOIN datasets AS d
WHERE l.spec_id = {{mark}} AND l.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1
  AND l.status IN ('ok', 'truncated')
GROUP BY l.spec_id, l.entry_id / {BLOCK_ENTRIES}, d.id
"""

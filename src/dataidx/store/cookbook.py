"""The cookbook of docs/sql.md as data: the questions people ask a store, and their SQL.

The store's own documented SQL: it reads the documented views and, where no view answers, the
tables, so it lives with the schema, the one place that names a table. Datasette offers it as
canned queries (``dataidx serve``); tests keep it equal to the docs and run each query.
"""

from __future__ import annotations

#: ``(title, sql)``, in the order of docs/sql.md.
COOKBOOK: list[tuple[str, str]] = [
    ('Share of each dataset in a mixture',
     "SELECT dataset, entries, share FROM composition WHERE mixture = 'default';"),
    ('Which rows repeat most (weights above 1, or `--sampling replacement`)',
     "SELECT d.name AS dataset, r.row, r.times FROM repeat_rows AS r\n"
     "JOIN mixtures AS m ON m.id = r.mixture_id JOIN datasets AS d ON d.id = r.dataset_id\n"
     "WHERE m.name = 'default' AND r.times > 1 ORDER BY r.times DESC, dataset, r.row LIMIT 10;"),
    ('How two mixtures differ, dataset by dataset',
     "SELECT a.dataset, a.entries AS in_a, b.entries AS in_b, b.entries - a.entries AS change\n"
     "FROM composition AS a JOIN composition AS b ON a.dataset = b.dataset\n"
     "WHERE a.mixture = 'default' AND b.mixture = 'seed7';"),
    ('Entries in one mixture that the other never uses',
     "WITH a AS (SELECT id FROM mixtures WHERE name = 'seed7'), b AS (SELECT id FROM mixtures WHERE name "
     "= 'default'),\n"
     'used AS (SELECT s.first_entry AS lo, s.first_entry + s.entries - 1 AS hi FROM mixture_spans AS s '
     'JOIN b ON s.mixture_id = b.id\n'
     '         UNION ALL SELECT 0, 0 UNION ALL SELECT max(id) + 1, max(id) + 1 FROM base_entries),\n'
     'gaps AS (SELECT lo, hi FROM (SELECT u.hi + 1 AS lo, lead(u.lo) OVER (ORDER BY u.lo) - 1 AS hi FROM '
     'used AS u) AS g\n'
     '         WHERE lo <= hi),\n'
     'kept AS (SELECT CASE WHEN s.first_entry > g.lo THEN s.first_entry ELSE g.lo END AS lo,\n'
     '                CASE WHEN s.first_entry + s.entries - 1 < g.hi THEN s.first_entry + s.entries - 1 '
     'ELSE g.hi END AS hi\n'
     '         FROM gaps AS g CROSS JOIN a JOIN mixture_spans AS s ON s.mixture_id = a.id AND s.first_entry BETWEEN\n'
     '           coalesce((SELECT max(first_entry) FROM mixture_spans WHERE mixture_id = a.id AND '
     'first_entry < g.lo), g.lo) AND g.hi)\n'
     'SELECT (SELECT name FROM datasets WHERE id = e.dataset_id) AS dataset, e.row, e.cut\n'
     'FROM kept AS k JOIN base_entries AS e ON e.id BETWEEN k.lo AND k.hi ORDER BY dataset, e.row, e.cut;'),
    ('How many turns conversations have, per dataset',
     'SELECT d.name AS dataset, t.turns, t.rows AS conversations FROM dataset_turns AS t\n'
     'JOIN datasets AS d ON d.id = t.dataset_id ORDER BY dataset, t.turns;'),
    ('What one position of a mixture is, and its seeds',
     "WITH m AS (SELECT id, name, start, seed FROM mixtures WHERE name = 'default'),\n"
     "p AS (SELECT r.first_entry + (m.start + 0 - r.start) AS entry_id FROM mixture_runs AS r "
     "JOIN m ON r.mixture_id = m.id\n"
     "      WHERE m.start + 0 BETWEEN r.start AND r.start + r.length - 1\n"
     "      UNION ALL\n"
     "      SELECT e.entry_id FROM mixture_entries AS e JOIN m ON e.id = m.start + 0)\n"
     "SELECT m.name AS mixture, 0 AS position, d.name AS dataset, b.row, b.cut, m.seed AS mixture_seed, "
     "md.seed AS dataset_seed\n"
     "FROM p CROSS JOIN m JOIN base_entries AS b ON b.id = p.entry_id JOIN datasets AS d ON d.id = b.dataset_id\n"
     "JOIN mixture_datasets AS md ON md.mixture_id = m.id AND md.dataset_id = d.id;"),
    ('Which rows were rejected, and why, per dataset',
     'SELECT dataset, count(*) AS rejected, min(reason) AS example FROM rejects GROUP BY dataset;'),
    ('How a mixture was made (seed, sampling, the config it came from, per dataset requested vs realised)',
     'SELECT m.name, m.seed, m.sampling, m.dataidx_version, d.name AS dataset, md.size, md.weight,\n'
     '       md.requested, md.entries\n'
     'FROM mixtures AS m JOIN mixture_datasets AS md ON md.mixture_id = m.id '
     'JOIN datasets AS d ON d.id = md.dataset_id;'),
    ('Why entries do not train, per dataset and reason (nothing is dropped without a row here)',
     "SELECT s.name AS spec, d.name AS dataset, t.status, t.entries, t.longest FROM render_statuses AS t\n"
     "JOIN render_specs AS s ON s.id = t.spec_id JOIN datasets AS d ON d.id = t.dataset_id\n"
     "WHERE t.status NOT IN ('ok') ORDER BY spec, dataset, t.status;"),
    ('Tokens and supervised tokens of a mixture, per dataset, under a spec',
     "WITH m AS (SELECT id, start, entries FROM mixtures WHERE name = 'default'),\n"
     'whole AS (SELECT r.first_entry AS lo, r.first_entry + r.length - 1 AS hi, (r.first_entry + 255) / 256 AS first,\n'
     '                 (r.first_entry + r.length) / 256 - 1 AS last FROM mixture_runs AS r JOIN m ON '
     'r.mixture_id = m.id),\n'
     'ends AS (SELECT lo, CASE WHEN first <= last THEN first * 256 - 1 ELSE hi END AS hi FROM whole\n'
     '         UNION ALL SELECT (last + 1) * 256, hi FROM whole WHERE first <= last),\n'
     'parts AS (SELECT d.id AS dataset_id, CASE WHEN e.lo > d.first_entry THEN e.lo ELSE d.first_entry END AS lo,\n'
     '                 CASE WHEN e.hi < d.first_entry + d.entries THEN e.hi ELSE d.first_entry + '
     'd.entries - 1 END AS hi\n'
     '          FROM ends AS e JOIN datasets AS d ON d.first_entry <= e.hi AND d.first_entry + d.entries > e.lo),\n'
     'counted AS (SELECT p.dataset_id, count(*) AS entries, sum(l.tokens) AS tokens,\n'
     '                   sum(l.supervised_tokens) AS supervised\n'
     '            FROM parts AS p CROSS JOIN render_specs AS s CROSS JOIN entry_renders AS l\n'
     "            WHERE s.name = 'default' AND l.spec_id = s.id AND l.entry_id BETWEEN p.lo AND p.hi\n"
     "              AND l.status IN ('ok', 'truncated')\n"
     '            GROUP BY p.dataset_id\n'
     '            UNION ALL\n'
     '            SELECT d.id, count(*), sum(l.tokens), sum(l.supervised_tokens)\n'
     '            FROM m CROSS JOIN mixture_entries AS e CROSS JOIN render_specs AS s CROSS JOIN entry_renders AS l\n'
     '              CROSS JOIN datasets AS d\n'
     "            WHERE e.id BETWEEN m.start AND m.start + m.entries - 1 AND s.name = 'default' AND l.spec_id = s.id\n"
     "              AND l.entry_id = e.entry_id AND l.status IN ('ok', 'truncated')\n"
     '              AND e.entry_id BETWEEN d.first_entry AND d.first_entry + d.entries - 1\n'
     '            GROUP BY d.id\n'
     '            UNION ALL\n'
     '            SELECT b.dataset_id, sum(b.entries), sum(b.tokens), sum(b.supervised_tokens)\n'
     '            FROM whole CROSS JOIN render_specs AS s CROSS JOIN render_blocks AS b\n'
     "            WHERE s.name = 'default' AND b.spec_id = s.id AND b.block BETWEEN whole.first AND whole.last\n"
     '            GROUP BY b.dataset_id)\n'
     'SELECT d.name AS dataset, sum(c.entries) AS entries, sum(c.tokens) AS tokens, sum(c.supervised) AS supervised\n'
     'FROM counted AS c JOIN datasets AS d ON d.id = c.dataset_id GROUP BY d.id, d.name, d.position\n'
     'HAVING sum(c.entries) > 0 ORDER BY d.position;'),
    ('How full each plan is',
     'SELECT plan, packs, entries, round(fill, 4) AS fill, left_out FROM pack_plans;'),
    ('The emptiest packs of a plan',
     "SELECT k.pack, k.members AS samples, k.tokens FROM packs AS k JOIN packing_plans AS p ON p.id = k.plan_id\n"
     "WHERE p.name = 'default' ORDER BY k.tokens, k.pack LIMIT 5;"),
    ('Which dataset gets the most trained tokens, per epoch',
     "SELECT epoch, dataset, entries, tokens, supervised_tokens, share_of_tokens FROM token_composition\n"
     "WHERE mixture = 'by_tokens' ORDER BY epoch, tokens DESC;"),
    ('How many rows of a dataset were never seen in all the epochs of a mixture',
     "SELECT d.name AS dataset, d.rows - d.rejected AS rows, md.distinct_rows AS seen,\n"
     "       d.rows - d.rejected - md.distinct_rows AS never_seen, m.epochs\n"
     "FROM mixture_datasets AS md JOIN mixtures AS m ON m.id = md.mixture_id "
     "JOIN datasets AS d ON d.id = md.dataset_id\n"
     "WHERE m.name = 'by_tokens' AND d.name = 'demo_alpaca';"),
]

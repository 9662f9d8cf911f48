"""The SQLite functions ``dataidx query`` lets a statement call: those a read needs.

SQLite's own scalar, aggregate, window, date, math and JSON functions, and nothing that reaches
outside the query: not ``load_extension``, not ``fts3_tokenizer`` (it hands out a library
pointer), not ``readfile``/``writefile`` or any function an extension adds.
"""

from __future__ import annotations

import sqlite3

READ_FUNCTIONS = frozenset("""
abs changes char coalesce concat concat_ws format glob hex ifnull iif instr last_insert_rowid length like
likelihood likely lower ltrim max min nullif octet_length printf quote random randomblob replace round rtrim
sign soundex sqlite_version substr substring total_changes trim typeof unhex unicode unlikely upper zeroblob
avg count group_concat string_agg sum total
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
date time datetime julianday unixepoch strftime timediff current_date current_time current_timestamp
acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi pow
power radians sin sinh sqrt tan tanh trunc
json json_array json_array_length json_error_position json_extract json_insert json_object json_patch
json_pretty json_remove json_replace json_set json_type json_valid json_quote json_group_array
json_group_object json_each json_tree jsonb jsonb_array jsonb_extract jsonb_insert jsonb_object jsonb_patch
jsonb_remove jsonb_replace jsonb_set jsonb_group_array jsonb_group_object
""".split())


def refused_function(action: int, name: str | None) -> bool:
    """Whether an authorizer call (``action`` with its second argument ``name``) is a function a
    read does not need: the one rule ``dataidx query`` and ``dataidx serve`` both apply."""
    return action == sqlite3.SQLITE_FUNCTION and (name or "").lower() not in READ_FUNCTIONS

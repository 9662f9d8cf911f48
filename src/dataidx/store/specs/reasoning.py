"""What becomes of an entry's reasoning under a spec (``entry_renders.reasoning``), in words and
as the SQL that counts its problems: shared by ``info``, ``compose``, the report and ``render``."""

from __future__ import annotations

#: What became of an entry's reasoning, worst first (``entry_renders.reasoning``; NULL: it has
#: none). The first four are problems ``info``, ``compose`` and the report count.
REASONING = ("dropped", "unclosed", "no_answer", "mode_mismatch", "inline", "kept")
REASONING_PROBLEMS = REASONING[:4]
#: The count of each reasoning problem, as further columns of a select over ``entry_renders AS l``.
REASONING_PROBLEM_SUMS = "".join(f", sum(CASE WHEN l.reasoning = '{problem}' THEN 1 ELSE 0 END)"
                                 for problem in REASONING_PROBLEMS)

#: What each reasoning problem means, for ``dataidx info`` and the report: ``(what, why)``.
REASONING_SAID = {
    "dropped": ("reasoning dropped from the trained tokens", "the template does not write it"),
    "unclosed": ("reasoning unclosed", "the trained turn opens <think> and never closes it"),
    "no_answer": ("reasoning without an answer", "nothing follows the reasoning: no text, no tool call"),
    "mode_mismatch": ("reasoning against the thinking switch",
                      "the user asked /no_think and the turn reasons, or /think and it does not"),
}

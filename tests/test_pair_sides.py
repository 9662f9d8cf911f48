"""A preference pair with one side only is refused at build, naming dataset, row and side, on the
vectorised path and the row path alike. It used to build (exit 0, counted as an entry) and fail at
render as the template's ``list object has no element 0``; a pairwise loss has nothing to compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.store import run_query

from .helpers import write_jsonl, write_yaml


def _chat(answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answer}]


def _standard(answer: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "value": "hi"}], "loss_weight": 0.0},
            {"role": "assistant", "content": [{"type": "text", "value": answer}], "loss_weight": 1.0}]


PAIR = {"chosen": _chat("yes"), "rejected": _chat("no")}
STANDARD = {"chosen_messages": _standard("yes"), "rejected_messages": _standard("no")}
#: (converter, a good row, the bad row, what the refusal says)
CASES = [
    ("pair", PAIR, {"chosen": _chat("yes")}, "rejected_messages is empty"),
    ("pair", PAIR, {"chosen": [], "rejected": _chat("no")}, "chosen_messages is empty"),
    (None, STANDARD, {"chosen_messages": _standard("yes")}, "rejected_messages is missing"),
    (None, STANDARD, {"chosen_messages": _standard("yes"), "rejected_messages": []}, "rejected_messages is empty"),
]


def _config(tmp_path: Path, rows: list[dict], converter: str | None, extra: str = "") -> Path:
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    line = f"  converter: {converter}\n" if converter else ""
    return write_yaml(tmp_path / "c.yaml", f"dpo:\n  path: {data}\n  source: local\n{line}{extra}")


@pytest.mark.parametrize("where", [0, 7])  # first or among good rows: the row path and the vectorised one
@pytest.mark.parametrize(("converter", "good", "bad", "said"), CASES)
def test_a_pair_with_a_missing_side_is_refused_at_build(tmp_path: Path, where: int, converter: str | None,
                                                        good: dict, bad: dict, said: str) -> None:
    rows = [good] * 12
    rows[where] = bad
    result = CliRunner().invoke(cli, ["build", str(_config(tmp_path, rows, converter)), "-o", str(tmp_path / "s.db"),
                                      "-q"])
    assert (result.exit_code, result.output) == (1, (
        f"Error: dataset 'dpo', row {where}, converter '{converter or 'none'}': {said}: a preference pair needs a "
        "chosen and a rejected side (a row with one answer is SFT data: give it as messages)\n")), result.output
    assert not (tmp_path / "s.db").exists()


def test_under_on_error_skip_the_one_sided_pair_is_a_reject_and_the_rest_build(tmp_path: Path) -> None:
    rows = [PAIR] * 5 + [{"chosen": _chat("yes")}] + [PAIR] * 5
    config = _config(tmp_path, rows, "pair", "  on_error: skip\n")
    result = CliRunner().invoke(cli, ["build", str(config), "-o", str(tmp_path / "s.db"), "-q"])
    assert result.exit_code == 0, result.output
    _, rejects = run_query(tmp_path / "s.db", "SELECT row, reason FROM rejects")
    assert [(row, "rejected_messages is empty" in reason) for row, reason in rejects] == [(5, True)]
    _, entries = run_query(tmp_path / "s.db", "SELECT count(*) FROM entries WHERE mixture = 'default'")
    assert entries == [(10,)]


def test_a_row_with_neither_side_is_still_an_empty_row_not_a_refusal(tmp_path: Path) -> None:
    rows = [PAIR] * 200 + [{"chosen": [], "rejected": []}]
    result = CliRunner().invoke(cli, ["build", str(_config(tmp_path, rows, "pair")), "-o", str(tmp_path / "s.db"),
                                      "-q"])
    assert result.exit_code == 0, result.output
    _, found = run_query(tmp_path / "s.db", "SELECT empty_rows FROM datasets")
    assert found == [(1,)]

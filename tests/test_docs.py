"""The docs stay true: every SQL example runs against the demo store, every view is documented."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dataidx.index import add_mixture
from dataidx.pack import pack_store
from dataidx.render import RenderRequest, render_store
from dataidx.store import run_query
from dataidx.store.schema import VIEW_COLUMNS

from .helpers import REPO, train_tokenizer

SQL_DOC = REPO / "docs" / "sql.md"


def sql_examples() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", SQL_DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def cookbook_store(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with a second mixture, rendered, packed, and a mixture of 3 epochs by tokens."""
    store = Path(shutil.copyfile(demo_store, tmp_path_factory.mktemp("docs") / "demo.db"))
    add_mixture(store, REPO / "data" / "demo_sft.yaml", "seed7", seed=7, sampling="replacement")
    tokenizer = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(tokenizer)
    render_store(RenderRequest(store, tokenizer, template="chatml", cutoff=96, truncation="drop"))
    pack_store(store, "default", capacity=256)
    add_mixture(store, REPO / "data" / "demo_budgets.yaml", "by_tokens", spec="default", epochs=3)
    return store


@pytest.mark.parametrize("sql", sql_examples())
def test_sql_examples_run_and_answer(cookbook_store: Path, sql: str) -> None:
    columns, rows = run_query(cookbook_store, sql)
    assert columns
    if "EXCEPT" not in sql and "rejects" not in sql:
        assert rows


def test_the_cookbook_served_by_datasette_is_the_one_in_the_docs() -> None:
    from dataidx.view import COOKBOOK

    assert [sql for _, sql in COOKBOOK] == [example.strip() for example in sql_examples()]


def test_every_view_is_documented_with_its_columns() -> None:
    text = SQL_DOC.read_text()
    for view, columns in VIEW_COLUMNS.items():
        assert f"| `{view}` | `{', '.join(columns)}` |" in text


def test_tokens_per_dataset_from_runs_answer_what_the_views_answer(cookbook_store: Path) -> None:
    """The cookbook reads a mixture's runs as ranges; joining the views position by position
    (the way it was written before, slow past 100k entries) must give the same figures."""
    by_views = ("SELECT e.dataset, count(*), sum(l.tokens), sum(l.supervised_tokens) FROM entries AS e "
                "JOIN entry_lengths AS l ON l.dataset = e.dataset AND l.row = e.row AND coalesce(l.cut, -1) = "
                "coalesce(e.cut, -1) WHERE e.mixture = '{mixture}' AND l.spec = 'default' AND l.status IN ('ok', "
                "'truncated') GROUP BY e.dataset ORDER BY min(e.position)")
    from dataidx.view import COOKBOOK

    from_runs = next(sql for title, sql in COOKBOOK if title.startswith("Tokens and supervised tokens"))
    for mixture in ("default", "seed7"):
        _, expected = run_query(cookbook_store, by_views.format(mixture=mixture))
        _, found = run_query(cookbook_store, from_runs.replace("name = 'default')", f"name = '{mixture}')"))
        assert sorted(found) == sorted(expected) and found


@pytest.mark.parametrize(("title", "by_views", "position"), [
    ("What one position of a mixture is",
     "SELECT e.mixture, e.position, e.dataset, e.row, e.cut, m.seed, md.seed FROM entries AS e "
     "JOIN mixtures AS m ON m.name = e.mixture JOIN datasets AS d ON d.name = e.dataset "
     "JOIN mixture_datasets AS md ON md.mixture_id = m.id AND md.dataset_id = d.id "
     "WHERE e.mixture = '{mixture}' AND e.position = {position}", True),
    ("The emptiest packs of a plan", "SELECT pack, count(*), sum(tokens) FROM pack_members WHERE plan = 'default' "
     "GROUP BY pack ORDER BY sum(tokens), pack LIMIT 5", False),
])
def test_cookbook_lookups_answer_what_the_views_answer(cookbook_store: Path, title: str, by_views: str,
                                                      position: bool) -> None:
    """Queries that read runs or a row per pack instead of expanding every position."""
    from dataidx.view import COOKBOOK

    sql = next(sql for found, sql in COOKBOOK if found.startswith(title))
    cases = [(m, p) for m in ("default", "seed7") for p in (0, 1, 17, 36)] if position else [("default", 0)]
    for mixture, at in cases:
        asked = sql.replace("name = 'default')", f"name = '{mixture}')").replace("+ 0", f"+ {at}")
        asked = asked.replace("0 AS position", f"{at} AS position")
        _, expected = run_query(cookbook_store, by_views.format(mixture=mixture, position=at))
        _, found = run_query(cookbook_store, asked)
        assert found == expected and found


def test_cookbook_token_and_coverage_answers_agree_with_the_positions(cookbook_store: Path) -> None:
    from dataidx.view import COOKBOOK

    most = next(sql for title, sql in COOKBOOK if title.startswith("Which dataset gets the most trained tokens"))
    _, rows = run_query(cookbook_store, most)
    assert sorted({epoch for epoch, *_ in rows}) == [0, 1, 2]
    _, by_views = run_query(cookbook_store, "SELECT e.epoch, e.dataset, count(*), sum(l.tokens) FROM entries AS e "
                                        "JOIN entry_lengths AS l ON l.spec = 'default' AND l.dataset = e.dataset AND "
                                        "l.row = e.row AND coalesce(l.cut, -1) = coalesce(e.cut, -1) "
                                        "WHERE e.mixture = 'by_tokens' GROUP BY e.epoch, e.dataset")
    assert sorted((epoch, dataset, entries, tokens) for epoch, dataset, entries, tokens, *_ in rows) == sorted(by_views)
    never = next(sql for title, sql in COOKBOOK if title.startswith("How many rows of a dataset were never seen"))
    (_, rows_, _, never_seen, epochs), = run_query(cookbook_store, never)[1]
    _, counted = run_query(cookbook_store, "SELECT count(*) FROM turns AS t WHERE t.dataset = 'demo_alpaca' "
                                           "AND NOT EXISTS (SELECT 1 FROM entries AS e WHERE e.mixture = 'by_tokens' "
                                           "AND e.dataset = t.dataset AND e.row = t.row)")
    assert never_seen == counted[0][0] and epochs == 3 and rows_ == 12


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    command = (REPO / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1]
    assert f"```bash\n{command}\n```" in readme


def test_pre_commit_runs_the_ruff_pyproject_pins() -> None:
    pinned = re.findall(r'"ruff==([^"]+)"', (REPO / "pyproject.toml").read_text())
    hooked = re.findall(r'"ruff==([^"]+)"', (REPO / ".pre-commit-config.yaml").read_text())
    assert len(pinned) == 1 and hooked == pinned

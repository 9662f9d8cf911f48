"""The report's media under a processor's spec (issue 53): per dataset, entries holding media and
their blocks, image placeholder tokens against text tokens of the entries that train, entries
truncated with media, entries that failed on media and rows rejected at build for a media file;
every figure held to SQL over the documented views, and read off the page in Chromium. A text
spec's report, and a text-only store's, show none of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PIL import Image

from dataidx.index import build
from dataidx.render import render_store
from dataidx.render.request import RenderRequest
from dataidx.store import run_query
from dataidx.view import report_figures, write_report

from .helpers import REPO, SHARED_DATA, write_jsonl, write_yaml
from .test_media_records import chat, mp4
from .test_media_render import demo_config
from .vl_processor import save_qwen2_vl_folder

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "mllm_demo_data").is_dir(), reason="../shared/data is not here")

#: What the page's media table says per dataset, after the dataset, in the JSON's keys.
COLUMNS = ("entries", "blocks", "training_entries", "media_tokens", "text_tokens", "media_share", "truncated",
           "failed", "rejected")
TRAINS = "status IN ('ok', 'truncated')"
#: Each entry holding media under spec 'default': its status and its images' placeholder tokens.
PER_ENTRY = """
SELECT em.dataset AS dataset, l.status AS status, count(*) AS blocks, sum(coalesce(mt.tokens, 0)) AS media
FROM entry_media AS em
JOIN entry_lengths AS l ON l.spec = 'default' AND l.dataset = em.dataset AND l.row = em.row AND l.cut IS em.cut
LEFT JOIN media_tokens AS mt ON mt.spec = 'default' AND mt.media_id = em.media_id
GROUP BY em.dataset, em.row, em.cut
"""


@pytest.fixture(scope="module")
def media_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both multimodal demos and a small third dataset ('extras': an image row, a video row the
    processor cannot render, a row naming a missing image and a malformed row, both skipped),
    rendered with a Qwen2-VL-style processor at cutoff 200, truncated from the left: some
    entries with images are truncated."""
    folder = tmp_path_factory.mktemp("report-media")
    (folder / "clip.mp4").write_bytes(mp4())
    Image.new("RGB", (56, 56), "red").save(folder / "red.png")
    write_jsonl(folder / "extras.jsonl", [chat(("image_url", str(folder / "red.png")), ("text", "what colour?")),
                                          chat(("video_url", str(folder / "clip.mp4")), ("text", "what happens?")),
                                          chat(("image_url", str(folder / "gone.png")), ("text", "and this?")),
                                          {"messages": "not a list"}])
    config = demo_config(folder)
    config.write_text(config.read_text() + f"extras:\n  path: {folder / 'extras.jsonl'}\n  source: local\n"
                                           "  on_error: skip\n")
    store = folder / "media.db"
    build(config, store)
    render_store(RenderRequest(store, save_qwen2_vl_folder(folder / "model"), cutoff=200, truncation="left", jobs=1))
    return store


def expected_rows(store: Path) -> list[tuple]:
    """The media table's rows, from SQL over the views alone (another route than the report's)."""
    def per_dataset(sql: str) -> dict[str, tuple]:
        return {row[0]: row[1:] for row in run_query(store, sql)[1]}

    entries = per_dataset(f"SELECT dataset, count(*), sum(blocks), sum({TRAINS}), "
                          f"sum(CASE WHEN {TRAINS} THEN media ELSE 0 END), sum(status = 'truncated') "
                          f"FROM ({PER_ENTRY}) GROUP BY dataset")
    lengths = per_dataset(f"SELECT dataset, sum(CASE WHEN {TRAINS} THEN tokens ELSE 0 END), "
                          "sum(status = 'render_error' AND cause IN ('media', 'placeholders')) "
                          "FROM entry_lengths WHERE spec = 'default' GROUP BY dataset")
    rejected = per_dataset("SELECT dataset, count(*) FROM rejects WHERE reason LIKE '%.png%' OR reason LIKE '%.mp4%' "
                           "GROUP BY dataset")
    rows = []
    for dataset in ("v1_multimodal_demo", "mllm_demo", "extras"):
        with_media, blocks, training, media, truncated = entries[dataset]
        tokens, failed = lengths[dataset]
        rows.append((dataset, with_media, blocks, training, media, tokens - media,
                     round(media / tokens, 6), truncated, failed, rejected.get(dataset, (0,))[0]))
    return rows


def test_the_media_figures_equal_sql_over_the_views(media_store: Path) -> None:
    """Each dataset's row, against SQL of its own over entry_media, media_tokens, entry_lengths
    and rejects; the demo store has what the figures are for: truncated entries with media, a
    video the processor cannot render, a missing image rejected (a malformed row is not media)."""
    media = report_figures(media_store, spec="default", samples=0)["spec"]["media"]
    assert [(row["dataset"], *(row[key] for key in COLUMNS)) for row in media] == expected_rows(media_store)
    by_name = {row["dataset"]: row for row in media}
    assert by_name["v1_multimodal_demo"]["truncated"] > 0 and by_name["mllm_demo"]["truncated"] > 0
    assert (by_name["extras"]["failed"], by_name["extras"]["rejected"]) == (1, 1)
    assert run_query(media_store, "SELECT count(*) FROM rejects WHERE dataset = 'extras'")[1] == [(2,)]
    assert all(0 < row["media_share"] < 1 for row in media)


def test_a_text_spec_or_a_text_store_shows_no_media_under_a_spec(media_store: Path, tmp_path: Path) -> None:
    """A spec rendered with a tokenizer alone counts no placeholder tokens: its report has the
    build's media table and nothing under the spec; a store without media has neither."""
    store = Path(shutil.copyfile(media_store, tmp_path / "text.db"))
    render_store(RenderRequest(store, REPO / "data" / "demo_tokenizer", cutoff=200, name="text"))
    assert report_figures(store, spec="text", samples=0)["spec"]["media"] is None
    page = write_report(store, tmp_path / "text.html", spec="text", samples=0).path.read_text(encoding="utf-8")
    assert "<div class='media'>" in page and "media-tokens" not in page and "chart-media" not in page
    write_jsonl(tmp_path / "t.jsonl", [chat(("text", "q"))])
    build(write_yaml(tmp_path / "t.yaml", f"t:\n  path: {tmp_path / 't.jsonl'}\n  source: local\n"), tmp_path / "t.db")
    render_store(RenderRequest(tmp_path / "t.db", REPO / "data" / "demo_tokenizer", cutoff=200))
    page = write_report(tmp_path / "t.db", tmp_path / "t.html", spec="default", samples=0).path.read_text("utf-8")
    assert "id='media'" not in page and "media-tokens" not in page


@pytest.mark.slow
def test_the_media_section_in_a_browser(media_store: Path, browser, tmp_path: Path) -> None:
    """The page's media table under the spec reads as the SQL says, its chart draws a media and a
    text bar per dataset, and it says media tokens are counted before truncation."""
    write_report(media_store, tmp_path / "r.html", spec="default", samples=1)
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.goto((tmp_path / "r.html").as_uri())
    rows = [row.split("\t") for row in page.locator("#summary .media-spec tr").all_inner_texts()]
    assert rows[1:] == [[dataset, *(f"{value:.2%}" if isinstance(value, float) else f"{value:,}" for value in row)]
                        for dataset, *row in expected_rows(media_store)], rows
    assert "counted before truncation" in page.inner_text("#summary")
    marks = page.locator("#chart-media [id^='mark-media-']")
    assert marks.count() == 2 * len(rows[1:]) == int(page.get_attribute("#chart-media", "data-marks"))
    for number in range(marks.count()):  # each bar laid out with a width (the text one of extras too)
        box = page.locator(f"#chart-media [id='mark-media-{number}'] path").first.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0, number
    page.locator("#media").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "media.png"), full_page=True)
    page.close()

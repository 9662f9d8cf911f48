"""Media are stored things (issue 53): every media block's file recorded once per distinct file,
with its header read without decoding; bad files refused in one line at build; a changed file
refused on fetch and named by verify."""

from __future__ import annotations

import json
import os
import shutil
import struct
import wave
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from dataidx import DataEngine
from dataidx.cli import cli
from dataidx.errors import StaleStoreError
from dataidx.index import build
from dataidx.read import verify_store
from dataidx.store import run_query

from .helpers import SHARED_DATA, one_line_error, read_jsonl, write_jsonl, write_yaml

#: The bounds a header is held to (dataidx.sources.media_headers): Pillow's MAX_IMAGE_PIXELS, 2**19 frames.
MAX_PIXELS, MAX_FRAMES = 89_478_485, 1 << 19
#: Recorded resolved, links followed (the shared folder is reached through a link).
DEMO_IMAGES = [(SHARED_DATA / "mllm_demo_data" / f"{n}.jpg").resolve() for n in (1, 2, 3)]


def rows_of(store: Path, sql: str) -> list[tuple]:
    return [tuple(row) for row in run_query(store, sql)[1]]


def chat(*blocks: tuple[str, str]) -> dict:
    """A standard row whose user message holds ``blocks`` ((type, value) pairs), one answer."""
    return {"messages": [
        {"role": "user", "content": [{"type": kind, "value": value} for kind, value in blocks]},
        {"role": "assistant", "content": [{"type": "text", "value": "ok"}]}]}


def box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def mp4(width: int = 64, height: int = 48, frames: int = 50, seconds: int = 2) -> bytes:
    """A minimal MP4 whose boxes say what a real one's do: one video track of ``frames`` frames."""
    mvhd = box(b"mvhd", struct.pack(">IIIII", 0, 0, 0, 1000, 1000 * seconds) + bytes(80))
    tkhd = box(b"tkhd", bytes(76) + struct.pack(">II", width << 16, height << 16))
    mdhd = box(b"mdhd", struct.pack(">IIIIIHH", 0, 0, 0, 12800, 12800 * seconds, 0, 0))
    hdlr = box(b"hdlr", bytes(8) + b"vide" + bytes(13))
    stsz = box(b"stsz", struct.pack(">III", 0, 1000, frames))
    trak = box(b"trak", tkhd + box(b"mdia", mdhd + hdlr + box(b"minf", box(b"stbl", stsz))))
    return box(b"ftyp", b"isom" + bytes(4) + b"isom") + box(b"moov", mvhd + trak) + box(b"mdat", bytes(64))


def wav(path: Path, frames: int = 8000, rate: int = 16000, channels: int = 1) -> Path:
    with wave.open(str(path), "wb") as audio:
        audio.setnchannels(channels)
        audio.setsampwidth(2)
        audio.setframerate(rate)
        audio.writeframes(bytes(2 * channels * frames))
    return path


def png_header(width: int, height: int) -> bytes:
    """A PNG of only a signature, an IHDR claiming ``width x height`` and IEND: no pixel data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))


def gif_frames(frames: int) -> bytes:
    """A 1x1 GIF of ``frames`` frames, each a minimal image block."""
    frame = b"," + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x4c\x01\x00"
    return b"GIF89a" + struct.pack("<HHBBB", 1, 1, 0, 0, 0) + frame * frames + b";"


def test_v1_multimodal_demo_records_every_block_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """v1 resolves ``data/mllm_demo_data/1.jpg`` against its working directory: so does the build."""
    monkeypatch.chdir(SHARED_DATA.parent)
    store = tmp_path / "mm.db"
    build("data/v1_multimodal_demo.yaml", store)
    expected = []
    for row, sample in enumerate(read_jsonl(SHARED_DATA / "v1_multimodal_demo.jsonl")):
        blocks = [(n, block["value"]) for n, message in enumerate(sample["messages"])
                  for block in message["content"] if block["type"] == "image_url"]
        expected += [(row, ordinal, message, written) for ordinal, (message, written) in enumerate(blocks)]
    assert len(expected) > 24
    recorded = rows_of(store, 'SELECT "row", ordinal, message, written FROM row_media ORDER BY "row", ordinal')
    assert recorded == expected
    files = rows_of(store, "SELECT path, kind, format, width, height, bytes, frames, samples FROM media ORDER BY path")
    assert files == [(str(path), "image", "JPEG", *Image.open(path).size, path.stat().st_size, None, None)
                     for path in DEMO_IMAGES]
    for path in DEMO_IMAGES:  # the header says what a full decode gives
        with Image.open(path) as image:
            image.load()
            assert rows_of(store, f"SELECT width, height FROM media WHERE path = '{path}'") == [image.size]
    # an entry (a cut) has the media of its messages below the cut, in order
    cuts = rows_of(store, "SELECT cut, count(*) FROM entry_media WHERE row = 0 GROUP BY cut ORDER BY cut")
    assert cuts == [(2, 1), (4, 2)]
    uses = rows_of(store, "SELECT sum(rows), sum(entries) FROM media")
    assert uses == [(24, rows_of(store, "SELECT count(*) FROM (SELECT DISTINCT dataset, row, cut, media_id "
                                        "FROM entry_media) AS used")[0][0])]


@pytest.mark.parametrize("media_dir", [True, False])
def test_mllm_demo_resolves_under_media_dir_or_the_data_folder(tmp_path: Path, media_dir: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """v0's ``mllm_demo.json`` writes ``mllm_demo_data/1.jpg``, relative to its data folder."""
    monkeypatch.chdir(tmp_path)
    key = f"  media_dir: {SHARED_DATA}\n" if media_dir else ""
    config = write_yaml(tmp_path / "c.yaml", f"mllm:\n  path: {SHARED_DATA / 'mllm_demo.json'}\n  source: local\n"
                                             f"  converter: openai\n{key}")
    build(config, tmp_path / "s.db")
    source = json.loads((SHARED_DATA / "mllm_demo.json").read_text())
    expected = [(row, ordinal, written) for row, item in enumerate(source)
                for ordinal, written in enumerate(item["images"])]
    recorded = rows_of(tmp_path / "s.db", 'SELECT "row", ordinal, written FROM row_media ORDER BY "row", ordinal')
    assert recorded == expected
    assert rows_of(tmp_path / "s.db", "SELECT path FROM media ORDER BY path") == [(str(p),) for p in DEMO_IMAGES]


def test_generated_wav_mp4_and_gif_headers(tmp_path: Path) -> None:
    (tmp_path / "clip.mp4").write_bytes(mp4(width=64, height=48, frames=50, seconds=2))
    wav(tmp_path / "a.wav", frames=8000, rate=16000, channels=2)
    frames = [Image.new("RGB", (20, 10), color) for color in ("red", "green", "blue")]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    Image.new("RGB", (40, 30)).save(tmp_path / "still.png")
    write_jsonl(tmp_path / "d.jsonl", [chat(("video_url", "clip.mp4"), ("text", "what?"), ("audio_url", "a.wav")),
                                       chat(("image_url", "anim.gif"), ("image_url", "still.png"),
                                            ("image_url", "anim.gif"))])
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"), tmp_path / "s.db")
    found = {Path(path).name: rest for path, *rest in rows_of(
        tmp_path / "s.db", "SELECT path, kind, format, width, height, frames, fps, duration, samples, rate, channels, "
                           "rows, entries FROM media")}
    with Image.open(tmp_path / "anim.gif") as gif:
        assert gif.n_frames == 3
    assert found == {
        "clip.mp4": ["video", "MP4", 64, 48, 50, 25.0, 2.0, None, None, None, 1, 1],
        "a.wav": ["audio", "WAV", None, None, None, None, 0.5, 8000, 16000, 2, 1, 1],
        "anim.gif": ["image", "GIF", 20, 10, 3, None, None, None, None, None, 1, 1],
        "still.png": ["image", "PNG", 40, 30, 1, None, None, None, None, None, 1, 1],
    }
    in_order = 'SELECT "row", ordinal, kind, written FROM entry_media ORDER BY "row", ordinal'
    assert rows_of(tmp_path / "s.db", in_order) == [
        (0, 0, "video", "clip.mp4"), (0, 1, "audio", "a.wav"),
        (1, 0, "image", "anim.gif"), (1, 1, "image", "still.png"), (1, 2, "image", "anim.gif")]


def _bad_inputs(folder: Path) -> dict[str, tuple[tuple[str, str], str]]:
    """name -> (the block naming the bad file, what the one line says)."""
    jpeg = DEMO_IMAGES[0].read_bytes()
    (folder / "cut.jpg").write_bytes(jpeg[:40])
    (folder / "huge.png").write_bytes(png_header(30000, 30000))
    (folder / "many.gif").write_bytes(gif_frames(1_000_000))
    (folder / "long.mp4").write_bytes(mp4(frames=1_000_000))
    (folder / "text.wav").write_bytes(b"this is not audio at all\n" * 10)
    (folder / "clip.avi").write_bytes(b"RIFF\x00\x00\x00\x00AVI LIST" + bytes(64))
    return {
        "missing image": (("image_url", "nope/missing.png"), "image 'nope/missing.png' is missing (looked for "),
        "truncated JPEG": (("image_url", "cut.jpg"), "image 'cut.jpg' ("),
        "30000x30000 header": (("image_url", "huge.png"), f"the bound of {MAX_PIXELS}"),
        "GIF of 10^6 frames": (("image_url", "many.gif"), f"claims {MAX_FRAMES + 1} frames, over the bound"),
        "video of 10^6 frames": (("video_url", "long.mp4"), f"claims 1000000 frames, over the bound of {MAX_FRAMES}"),
        "audio that is not one": (("audio_url", "text.wav"), "it is not audio dataidx reads: WAV (PCM) only"),
        "unsupported video": (("video_url", "clip.avi"), "it is not video dataidx reads: MP4/MOV only"),
        "a URL": (("image_url", "https://example.com/a.png"), "is a URL or inline data, not a file"),
    }


@pytest.mark.parametrize("case", ["missing image", "truncated JPEG", "30000x30000 header", "GIF of 10^6 frames",
                                  "video of 10^6 frames", "audio that is not one", "unsupported video", "a URL"])
def test_a_bad_media_file_is_one_line_and_nothing_is_written(tmp_path: Path, case: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block, said = _bad_inputs(tmp_path)[case]
    good = Image.new("RGB", (8, 8))
    good.save(tmp_path / "good.png")
    write_jsonl(tmp_path / "d.jsonl", [chat(("image_url", "good.png")), chat(("text", "see"), block)])
    config = write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n")
    result = CliRunner().invoke(cli, ["build", str(config), "-o", str(tmp_path / "s.db"), "-q"])
    one_line_error(result, "dataset 'd', row 1: ", block[1], said)
    assert not (tmp_path / "s.db").exists()
    if case == "missing image":
        one_line_error(result, f"{tmp_path / 'nope/missing.png'}", "give the dataset a media_dir")
    # under on_error: skip the row is a reject with that reason, and the good row's file is recorded
    skip = write_yaml(tmp_path / "skip.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"
                                              "  on_error: skip\n")
    build(skip, tmp_path / "s.db")
    (reason,), = rows_of(tmp_path / "s.db", "SELECT reason FROM rejects WHERE row = 1")
    assert said in reason and block[1] in reason
    assert rows_of(tmp_path / "s.db", "SELECT written FROM entry_media") == [("good.png",)]
    assert rows_of(tmp_path / "s.db", "SELECT count(*) FROM media") == [(1,)]


def test_a_jpeg_cut_after_its_header_builds_as_documented(tmp_path: Path) -> None:
    """Only a decode finds data cut short after a valid header: the build records the header."""
    (tmp_path / "short.jpg").write_bytes(DEMO_IMAGES[1].read_bytes()[:4000])
    write_jsonl(tmp_path / "d.jsonl", [chat(("image_url", str(tmp_path / "short.jpg")))])
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"), tmp_path / "s.db")
    assert rows_of(tmp_path / "s.db", "SELECT width, height, bytes FROM media") == [(300, 199, 4000)]


def test_a_changed_media_file_is_refused_on_fetch_and_named_by_verify(tmp_path: Path) -> None:
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    Image.new("RGB", (8, 8), "blue").save(tmp_path / "b.png")
    write_jsonl(tmp_path / "d.jsonl", [chat(("image_url", "a.png")), chat(("image_url", "b.png")), chat(("text", "q"))])
    store = tmp_path / "s.db"
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"), store)
    assert verify_store(store)["ok"]
    Image.new("RGB", (9, 9), "green").save(tmp_path / "a.png")
    os.remove(tmp_path / "b.png")
    with DataEngine(store) as engine:
        assert engine[2]["messages"][0]["content"] == [{"type": "text", "value": "q"}]  # no media: served
        with pytest.raises(StaleStoreError, match=f"dataset 'd' row 0: media file {tmp_path / 'a.png'} changed "
                                                  "since the build.*rebuild"):
            engine[0]
        with pytest.raises(StaleStoreError, match=f"media file {tmp_path / 'b.png'} is gone"):
            engine[1]
    with DataEngine(store, verify=False) as engine:
        assert engine[0]["messages"][0]["content"] == [{"type": "image_url", "value": "a.png"}]
    report = verify_store(store)
    assert not report["ok"]
    assert report["media"][1:] == [f"media file {tmp_path / 'b.png'} is missing"]
    assert report["media"][0].startswith(f"media file {tmp_path / 'a.png'} changed size")
    result = CliRunner().invoke(cli, ["verify", str(store)])
    assert result.exit_code == 1 and f"media file {tmp_path / 'b.png'} is missing" in result.output


def test_a_file_rewritten_in_place_is_found_by_verify(tmp_path: Path) -> None:
    """Same size and mtime, other bytes: only the rehash finds it."""
    wav(tmp_path / "a.wav")
    write_jsonl(tmp_path / "d.jsonl", [chat(("audio_url", "a.wav"))])
    store = tmp_path / "s.db"
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"), store)
    stat = os.stat(tmp_path / "a.wav")
    data = bytearray((tmp_path / "a.wav").read_bytes())
    data[-1] ^= 0xFF
    (tmp_path / "a.wav").write_bytes(bytes(data))
    os.utime(tmp_path / "a.wav", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert verify_store(store)["media"] == [f"media file {tmp_path / 'a.wav'} has different content "
                                            "(same size and mtime)"]


def test_info_shows_media_per_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SHARED_DATA.parent)
    build("data/v1_multimodal_demo.yaml", tmp_path / "s.db")
    total = sum(path.stat().st_size for path in DEMO_IMAGES)
    details = json.loads(CliRunner().invoke(cli, ["info", str(tmp_path / "s.db"), "--json"]).output)
    assert [(d["media_files"], d["media_bytes"]) for d in details["datasets"]] == [(3, total)]
    text = CliRunner().invoke(cli, ["info", str(tmp_path / "s.db")]).output
    assert f"dataset 'multimodal_demo' names 3 media files, {total:,} bytes" in text


def test_a_text_only_table_keeps_its_vectorised_path() -> None:
    import pyarrow as pa

    from dataidx.convert import may_hold_media

    text = pa.Table.from_pylist([chat(("text", "a")), chat(("text", "b"))])
    image = pa.Table.from_pylist([chat(("text", "a")), chat(("image_url", "x.png"))])
    assert not may_hold_media(text)
    assert may_hold_media(image)
    assert may_hold_media(pa.Table.from_pylist([{"instruction": "q", "output": "a", "images": None}]))


@pytest.mark.slow  # a real PostgreSQL server
def test_a_multimodal_store_in_postgresql_reads_as_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .postgres_server import running_server

    for name in ("a.png", "b.png"):
        Image.new("RGB", (6, 4), "red").save(tmp_path / name)
    write_jsonl(tmp_path / "d.jsonl", [chat(("image_url", "a.png"), ("image_url", "b.png")), chat(("text", "q")),
                                       chat(("image_url", "b.png"))])
    config = write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n")
    monkeypatch.chdir(SHARED_DATA.parent)
    shared = write_yaml(tmp_path / "mm.yaml", f"mm:\n  path: {SHARED_DATA / 'v1_multimodal_demo.jsonl'}\n"
                                              "  source: local\n")
    with running_server() as server:
        for number, yaml in enumerate((config, shared)):
            url, file = f"{server}&schema=media{number}", tmp_path / f"s{number}.db"
            build(yaml, file)
            build(yaml, url)
            for sql in ("SELECT * FROM media ORDER BY id",
                        "SELECT * FROM entry_media ORDER BY dataset, row, cut, ordinal"):
                assert run_query(url, sql)[1] == run_query(file, sql)[1]
            infos = [json.loads(CliRunner().invoke(cli, ["info", target, "--json"]).output)["datasets"]
                     for target in (str(file), url)]
            assert [(d["media_files"], d["media_bytes"]) for d in infos[0]] == \
                   [(d["media_files"], d["media_bytes"]) for d in infos[1]]
            with DataEngine(file) as local, DataEngine(url) as served:
                assert [served[i] for i in range(len(served))] == [local[i] for i in range(len(local))]
        Image.new("RGB", (7, 4), "red").save(tmp_path / "b.png")
        with DataEngine(f"{server}&schema=media0") as served:
            assert served[1]["messages"][0]["content"] == [{"type": "text", "value": "q"}]
            with pytest.raises(StaleStoreError, match=f"media file {tmp_path / 'b.png'} changed"):
                served[2]
        assert verify_store(f"{server}&schema=media0")["media"][0].startswith(f"media file {tmp_path / 'b.png'}")


def test_media_dir_must_name_a_folder(tmp_path: Path) -> None:
    from dataidx.config import load_config
    from dataidx.errors import ConfigError

    write_jsonl(tmp_path / "d.jsonl", [chat(("text", "q"))])
    with pytest.raises(ConfigError, match="key 'media_dir' must be the folder the dataset's media paths start from"):
        load_config(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  media_dir: 5\n"))
    spec = load_config(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  media_dir: m\n"))
    assert spec.datasets[0].media_dir == os.path.abspath("m")


def test_a_store_moved_with_its_project_folder_reads_its_own_media(tmp_path: Path) -> None:
    """As its sources do (issue 50), a store copied with its project folder (``cp -a``: times kept)
    reads and verifies its media at their places relative to it, the original folder gone; a copy
    whose own image changed is refused, though the original is unchanged."""
    project = tmp_path / "project"
    (project / "images").mkdir(parents=True)
    Image.new("RGB", (8, 8), "red").save(project / "images" / "a.png")
    write_jsonl(project / "d.jsonl", [chat(("image_url", "images/a.png")), chat(("text", "q"))])
    config = write_yaml(project / "c.yaml", f"d:\n  path: {project / 'd.jsonl'}\n  source: local\n"
                                            f"  media_dir: {project}\n")
    build(config, project / "s.db")
    assert rows_of(project / "s.db", "SELECT relative FROM media_files") == [("images/a.png",)]
    moved = tmp_path / "moved"
    shutil.copytree(project, moved)  # copy2: sizes and times kept, as cp -a keeps them
    shutil.rmtree(project)
    with DataEngine(moved / "s.db") as engine:
        assert engine[0]["messages"][0]["content"][0] == {"type": "image_url", "value": "images/a.png"}
    assert verify_store(moved / "s.db")["ok"]
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    Image.new("RGB", (9, 9), "blue").save(copy / "images" / "a.png")
    with DataEngine(copy / "s.db") as engine, pytest.raises(StaleStoreError, match=f"{copy / 'images' / 'a.png'}"):
        engine[0]
    assert not verify_store(copy / "s.db")["ok"] and verify_store(moved / "s.db")["ok"]


def test_the_report_lists_each_datasets_media_in_a_browser(tmp_path: Path, browser) -> None:
    """The report's summary says, per dataset, the distinct media files its rows name and their
    bytes, as info does, read off the page; a text-only store's report has no media table."""
    from dataidx.view import write_report

    for colour in ("red", "blue"):
        Image.new("RGB", (8, 8), colour).save(tmp_path / f"{colour}.png")
    write_jsonl(tmp_path / "d.jsonl", [chat(("image_url", "red.png")), chat(("image_url", "blue.png")),
                                       chat(("image_url", "red.png"))])
    write_jsonl(tmp_path / "t.jsonl", [chat(("text", "q"))])
    store = tmp_path / "s.db"
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.jsonl'}\n  source: local\n"
                                          f"t:\n  path: {tmp_path / 't.jsonl'}\n  source: local\n"), store)
    size = sum((tmp_path / f"{colour}.png").stat().st_size for colour in ("red", "blue"))
    write_report(store, tmp_path / "r.html")
    page = browser.new_page()
    page.goto((tmp_path / "r.html").as_uri())
    rows = page.locator("#summary .media tr").all_inner_texts()
    assert [row.split("\t") for row in rows[1:]] == [["d", "2", f"{size:,}"], ["t", "0", "0"]], rows
    build(write_yaml(tmp_path / "text.yaml", f"t:\n  path: {tmp_path / 't.jsonl'}\n  source: local\n"),
          tmp_path / "text.db")
    write_report(tmp_path / "text.db", tmp_path / "text.html")
    page.goto((tmp_path / "text.html").as_uri())
    assert page.locator("#summary .media").count() == 0 and page.locator("#summary").count() == 1
    page.close()


"""Multimodal entries rendered with a model folder's processor (issue 53): lengths counted from the
recorded headers equal LLaMA-Factory v1's Renderer entry for entry, and so do the features served
on fetch (rendered then, or read from stored tokens); truncation drops an image whose placeholder
run crosses the cutoff as v1's collation does; the Collator batches media as v1 does, its dummy
fragment included; a changed file or processor is refused in one line.

What v1 made of the demos is tests/conformance/golden/qwen2_vl_demo.json (tests/test_vl_processor.py
records it from v1's own Renderer); with DATAIDX_LLAMAFACTORY naming v1's src, v1's Renderer and
``pad_and_truncate`` also run here on the truncated cases.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from dataidx import Collator, DataEngine
from dataidx.cli import cli
from dataidx.errors import MediaError, StaleStoreError
from dataidx.index import build
from dataidx.render import render_store
from dataidx.render.media_render import EntryMedium, MediaRenderer, kept_media, prove_header_counts
from dataidx.render.media_tokens import qwen2_vl_grid
from dataidx.render.renderer import Renderer
from dataidx.render.request import RenderRequest
from dataidx.render.served import RenderedMixture
from dataidx.store import run_query
from dataidx.training.media_rope import mrope_positions

from .conformance import GOLDEN, digest
from .conformance.v1 import v1_renderer_class
from .helpers import SHARED, SHARED_DATA, one_line_error, write_jsonl, write_yaml
from .vl_processor import demo_entries, qwen2_vl_processor, save_qwen2_vl_folder

GOLDEN_DEMOS = json.loads((GOLDEN / "qwen2_vl_demo.json").read_text(encoding="utf-8"))
IGNORE = -100

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "mllm_demo_data").is_dir(), reason="../shared/data is not here")


def demo_config(folder: Path) -> Path:
    """Both multimodal demos: v1's (paths relative to the folder above data/, as v1 runs there)
    and v0's mllm_demo through the openai converter (paths relative to its data folder)."""
    return write_yaml(folder / "demos.yaml", f"""
v1_multimodal_demo:
  path: {SHARED_DATA / 'v1_multimodal_demo.jsonl'}
  source: local
  media_dir: {SHARED}
mllm_demo:
  path: {SHARED_DATA / 'mllm_demo.json'}
  source: local
  converter: openai
""")


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store of both demos rendered with a Qwen2-VL-style processor's folder, tokens stored
    under spec ``tokens``; ``(store, model folder)``."""
    folder = tmp_path_factory.mktemp("media-render")
    store = folder / "demos.db"
    build(demo_config(folder), store)
    model = save_qwen2_vl_folder(folder / "model")
    render_store(RenderRequest(store, model, cutoff=4096, jobs=1))
    render_store(RenderRequest(store, model, cutoff=4096, jobs=1, name="tokens", store_tokens=True))
    return store, model


def summary(served: dict[str, Any]) -> dict[str, Any]:
    """What tests/test_vl_processor.py records of v1's model input, of one served entry."""
    pixels = served["pixel_values"]
    return {"ids": digest(served["input_ids"], served["labels"], served["loss_weights"]),
            "length": len(served["input_ids"]),
            "pixel_values": [list(pixels.shape), hashlib.sha256(pixels.float().numpy().tobytes()).hexdigest()[:12]],
            "image_grid_thw": served["image_grid_thw"].tolist(), "image_tokens": served["mm_token_type_ids"].count(1)}


def golden(dataset: str, row: int, cut: int | None) -> dict[str, Any]:
    """What v1 made of the entry (its summary, without where it is)."""
    found = next(entry for entry in GOLDEN_DEMOS[dataset] if (entry["row"], entry["cut"]) == (row, cut))
    return {key: value for key, value in found.items() if key not in ("row", "cut")}


def test_stored_lengths_are_v1s_counted_from_headers(demos: tuple[Path, Path]) -> None:
    store, model = demos
    lengths = run_query(store, "SELECT dataset, row, cut, tokens, status FROM entry_lengths WHERE spec = 'default'")[1]
    assert len(lengths) == sum(len(entries) for entries in GOLDEN_DEMOS.values()) == 60
    assert [(tokens, status) for dataset, row, cut, tokens, status in lengths] == [
        (golden(dataset, row, cut)["length"], "ok") for dataset, row, cut, _, _ in lengths]
    spec = run_query(store, "SELECT template, processor, media_proof FROM render_specs WHERE name = 'default'")[1][0]
    assert spec[0] == "processor"  # v1 renders with the processor's template (chat_template.json here)
    assert json.loads(spec[1])["image_processor_type"] == "Qwen2VLImageProcessor"  # the class its settings name
    assert spec[2] == "header counts equal to the processor's on 3 of 3 images (seed 0)"
    counted = run_query(store, "SELECT width, height, tokens, grid_t, grid_h, grid_w, frames FROM media_tokens "
                               "WHERE spec = 'default' ORDER BY path")[1]
    assert counted == [(w, h, (grid := qwen2_vl_grid(w, h)).tokens, grid.t, grid.h, grid.w, None)
                       for w, h, *_ in counted]
    assert len(counted) == 3


@pytest.mark.parametrize("spec", ["default", "tokens"])
def test_served_entries_are_v1s_model_inputs(demos: tuple[Path, Path], spec: str) -> None:
    """On fetch (rendered then) and from stored tokens: ids, labels, weights, pixel values (their
    float32 bytes), grids and image-token types equal v1's Renderer on every demo entry."""
    store, _ = demos
    with RenderedMixture(store, spec=spec) as served:
        assert (served.tokens is not None) == (spec == "tokens")
        triples = served.reader.triples(list(range(len(served))))
        entries = served.get_many(list(range(len(served))))
        names = [served.reader.datasets[dataset].name for dataset, _, _ in triples]
    assert len(entries) == 60
    for name, (_, row, cut), entry in zip(names, triples, entries):
        assert summary(entry) == golden(name, row, cut), (name, row, cut)
        assert set(entry) == {"_dataset_name", "input_ids", "labels", "loss_weights", "attention_mask",
                              "pixel_values", "image_grid_thw", "mm_token_type_ids"}


def test_the_engine_serves_them_and_the_collator_batches_them_as_v1(demos: tuple[Path, Path]) -> None:
    store, _ = demos
    with DataEngine(store, render="tokens") as engine:
        entries = engine[[0, 1, 2]]
        fragment = engine.dummy_media_fragment()
    collator = Collator(pad_token_id=0, dummy_media=fragment)
    batch = collator(entries)
    width = max(len(entry["input_ids"]) for entry in entries)
    assert batch["input_ids"].shape == batch["mm_token_type_ids"].shape == (3, width)
    for k, entry in enumerate(entries):  # types laid out as the ids, padded with 0
        size = len(entry["input_ids"])
        assert batch["mm_token_type_ids"][k, :size].tolist() == entry["mm_token_type_ids"]
        assert not batch["mm_token_type_ids"][k, size:].any()
    assert torch.equal(batch["pixel_values"], torch.cat([entry["pixel_values"] for entry in entries]))
    assert torch.equal(batch["image_grid_thw"], torch.cat([entry["image_grid_thw"] for entry in entries]))
    assert batch["input_ids"].shape[1] == width  # a batch with images gets no dummy


def test_a_batch_without_images_gets_v1s_dummy_fragment(demos: tuple[Path, Path]) -> None:
    """v1's ``_inject_dummy_into_collated``: the fragment's tokens as extra columns of row 0,
    attended, unlabelled, weight 0, positions continuing; its pixels become the batch's."""
    store, _ = demos
    with DataEngine(store, render="tokens") as engine:
        fragment = engine.dummy_media_fragment()
    text = [{"input_ids": [5, 6, 7], "labels": [IGNORE, 6, 7], "loss_weights": [0.0, 1.0, 1.0]},
            {"input_ids": [8, 9], "labels": [IGNORE, 9], "loss_weights": [0.0, 1.0]}]
    batch = Collator(pad_token_id=0, dummy_media=fragment)(text)
    size = len(fragment["input_ids"])
    assert size == 6 and fragment["mm_token_type_ids"] == [0, 1, 1, 1, 1, 0]  # start, 4 image tokens, end
    assert batch["input_ids"].tolist() == [[5, 6, 7, *fragment["input_ids"]], [8, 9, 0] + [0] * size]
    assert batch["attention_mask"].tolist() == [[1] * (3 + size), [1, 1, 0] + [0] * size]
    assert batch["labels"][:, 3:].eq(IGNORE).all() and not batch["loss_weights"][:, 3:].any()
    assert batch["position_ids"].shape == (4, 2, 3 + size)  # text positions, then M-RoPE's rows
    assert batch["position_ids"][0, 0].tolist() == list(range(3 + size))
    rope = mrope_positions([0, 0, 0, *fragment["mm_token_type_ids"]], fragment["image_grid_thw"], 1)
    assert torch.equal(batch["position_ids"][1:, 0], rope)  # the fragment's image where row 0 ends
    assert batch["mm_token_type_ids"].tolist() == [[0, 0, 0, *fragment["mm_token_type_ids"]], [0] * (3 + size)]
    assert torch.equal(batch["pixel_values"], fragment["pixel_values"])
    assert batch["image_grid_thw"].tolist() == [[1, 4, 4]]
    packed = Collator(pad_token_id=0, dummy_media=fragment)([text])  # in a pack: one more sample, unlabelled
    assert packed["input_ids"][0].tolist() == [5, 6, 7, 8, 9, *fragment["input_ids"]]
    assert packed["sample_ids"][0].tolist() == [1, 1, 1, 2, 2] + [3] * size
    assert packed["labels"][0, 5:].eq(IGNORE).all() and torch.equal(packed["pixel_values"], fragment["pixel_values"])
    assert torch.equal(packed["position_ids"][1:, 0, 5:], mrope_positions(fragment["mm_token_type_ids"],
                                                                          fragment["image_grid_thw"], 1))


def two_image_store(tmp_path: Path, cutoff: int, truncation: str) -> Path:
    """v1_multimodal_demo's row 0 (two images, a 66-token run each; its second entry is 234
    tokens, the second image late in it) alone in a store, rendered at ``cutoff``."""
    row = json.loads((SHARED_DATA / "v1_multimodal_demo.jsonl").read_text(encoding="utf-8").splitlines()[0])
    write_jsonl(tmp_path / "one.jsonl", [row])
    build(write_yaml(tmp_path / "c.yaml", f"one:\n  path: {tmp_path / 'one.jsonl'}\n  source: local\n"
                                          f"  media_dir: {SHARED}\n"), tmp_path / "s.db")
    model = save_qwen2_vl_folder(tmp_path / "model")
    render_store(RenderRequest(tmp_path / "s.db", model, cutoff=cutoff, truncation=truncation, jobs=1))
    return tmp_path / "s.db"


def two_image_sample() -> tuple[dict[str, Any], list[EntryMedium]]:
    """Row 0's second entry and its images as the build records them."""
    _, _, sample = demo_entries("v1_multimodal_demo")[1]
    media = []
    for number, message in enumerate(sample["messages"]):
        for block in message["content"]:
            if block["type"] == "image_url":
                with Image.open(block["value"]) as image:
                    media.append(EntryMedium(number, "image", block["value"], *image.size))
    return sample, media


def test_right_truncation_drops_the_image_crossing_the_cutoff() -> None:
    """Cut at 200, the second image's run crosses the cutoff: it is dropped as v1's
    ``_align_grid_media`` drops it (its tokens inside the window id 0, unlabelled), and the answer
    past the cutoff leaves nothing to train (v1's batch generator drops such a sample)."""
    processor = qwen2_vl_processor()
    image = processor.image_token_id
    sample, media = two_image_sample()
    rendered = MediaRenderer(processor, Renderer(processor.tokenizer, processor.chat_template, 200,
                                                 "right")).render(sample, media)
    ids = rendered.input_ids
    assert (rendered.status, rendered.full_tokens, rendered.media_tokens) == ("no_supervision", 234, 132)
    assert len(ids) == 200 and ids.count(image) == 66  # the first image's run alone is left
    zeroed = [at for at, token in enumerate(ids) if token == 0]
    assert zeroed and zeroed == list(range(zeroed[0], 200))  # the orphaned run's tokens inside the window
    assert all(rendered.labels[at] == IGNORE and rendered.loss_weights[at] == 0.0 for at in zeroed)
    assert kept_media(ids, image, [66, 66], keep_end=False) == range(1)
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    if source:  # v1 itself: its Renderer, then its collation's truncation at the same cutoff
        made = v1_renderer_class(Path(source))(processor).process_samples([sample])[0]
        from llamafactory.v1.core.utils.collation import pad_and_truncate  # type: ignore[import-not-found]

        theirs = pad_and_truncate([made], 200)[0]
        for key, ours in (("input_ids", ids), ("labels", rendered.labels), ("loss_weights", rendered.loss_weights)):
            assert theirs[key].tolist() == ours, key
        assert theirs["image_grid_thw"].tolist() == [[1, 12, 22]]


def test_left_truncation_serves_the_images_its_window_holds(tmp_path: Path) -> None:
    """Kept from the end (the trained answer stays), the first image's run is cut: the entry trains
    with the second image alone, its pixels and grid served for it only."""
    processor = qwen2_vl_processor()
    image = processor.image_token_id
    store = two_image_store(tmp_path, 200, "left")
    assert run_query(store, "SELECT cut, tokens, full_tokens, status FROM entry_lengths")[1] == [
        (2, 127, 127, "ok"), (4, 200, 234, "truncated")]
    with RenderedMixture(store, spec="default") as served:
        cuts = [cut for _, _, cut in served.reader.triples(list(range(len(served))))]
        entry = served.get(cuts.index(4))
    ids = entry["input_ids"]
    assert len(ids) == 200 and ids.count(image) == 66
    assert entry["image_grid_thw"].tolist() == [[1, 12, 22]] and entry["pixel_values"].shape == (264, 1176)
    assert entry["mm_token_type_ids"] == [int(token == image) for token in ids]
    second = Image.open(two_image_sample()[1][1].path).convert("RGB")
    alone = processor.image_processor(images=[second], return_tensors="pt")
    assert torch.equal(entry["pixel_values"], alone["pixel_values"])  # the second image's, not the first's
    assert entry["labels"][-1] != IGNORE


def test_under_drop_an_entry_past_the_cutoff_with_its_images_is_too_long(tmp_path: Path) -> None:
    store = two_image_store(tmp_path / "a", 240, "drop")
    assert run_query(store, "SELECT cut, tokens, status FROM entry_lengths")[1] == [(2, 127, "ok"), (4, 234, "ok")]
    store = two_image_store(tmp_path / "b", 200, "drop")
    assert run_query(store, "SELECT cut, full_tokens, status FROM entry_lengths")[1] == [(2, 127, "ok"),
                                                                                        (4, 234, "too_long")]


def test_a_changed_image_or_processor_is_refused_in_one_line(tmp_path: Path) -> None:
    media = tmp_path / "media"
    shutil.copytree(SHARED_DATA / "mllm_demo_data", media / "mllm_demo_data")
    source = json.loads((SHARED_DATA / "mllm_demo.json").read_text(encoding="utf-8"))[:2]
    (tmp_path / "d.json").write_text(json.dumps(source), encoding="utf-8")
    build(write_yaml(tmp_path / "c.yaml", f"d:\n  path: {tmp_path / 'd.json'}\n  source: local\n  converter: openai\n"
                                          f"  media_dir: {media}\n"), tmp_path / "s.db")
    model = save_qwen2_vl_folder(tmp_path / "model")
    render_store(RenderRequest(tmp_path / "s.db", model, cutoff=4096, jobs=1, store_tokens=True))
    config = model / "preprocessor_config.json"
    settings = config.read_text()
    config.write_text(json.dumps({**json.loads(settings), "max_pixels": 200_000}))
    with pytest.raises(StaleStoreError, match="the image processor at .* changed since its lengths were computed"):
        RenderedMixture(tmp_path / "s.db", spec="default")
    result = CliRunner().invoke(cli, ["show", str(tmp_path / "s.db"), "0", "--render", "default"])
    one_line_error(result, "changed since its lengths were computed")
    config.write_text(settings)
    image = media / "mllm_demo_data" / "1.jpg"
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])  # cut short: changed since the build
    with RenderedMixture(tmp_path / "s.db", spec="default") as served:
        with pytest.raises(StaleStoreError, match=r"dataset 'd' row 0: media file .*1\.jpg changed since the build"):
            served.get(0)
    with RenderedMixture(tmp_path / "s.db", spec="default", verify=False) as served:  # read anyway: undecodable
        with pytest.raises(MediaError, match=r"dataset 'd', row 0: media file .*1\.jpg cannot be decoded") as caught:
            served.get(0)
        assert "\n" not in str(caught.value)
    result = CliRunner().invoke(cli, ["show", str(tmp_path / "s.db"), "0", "--render", "default"])
    one_line_error(result, "1.jpg changed since the build")


def test_placeholders_the_template_adds_are_v1s_render_error(tmp_path: Path) -> None:
    """v1's ``_check_placeholder_counts``: a template that writes an image placeholder of its own
    leaves more placeholders than image blocks; the entry is a render_error in v1's words."""
    build(demo_config(tmp_path), tmp_path / "s.db")
    model = save_qwen2_vl_folder(tmp_path / "model")
    forged = tmp_path / "forged.jinja"
    forged.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n<|vision_start|><|image_pad|><|vision_end|>"
                      "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
                      "{% if c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
                      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}", encoding="utf-8")
    summary_ = render_store(RenderRequest(tmp_path / "s.db", model, cutoff=4096, jobs=1, template=str(forged)))
    assert summary_.kept == 0
    details = run_query(tmp_path / "s.db", "SELECT DISTINCT cause, detail FROM entry_lengths")[1]
    assert {cause for cause, _ in details} == {"placeholders"}
    assert all(detail.startswith("image placeholder count (") and "!= number of image blocks (" in detail
               for _, detail in details)


def test_videos_are_a_render_error_saying_what_is_missing(tmp_path: Path) -> None:
    from .test_media_records import mp4

    (tmp_path / "clip.mp4").write_bytes(mp4())
    rows = [{"messages": [{"role": "user", "content": [{"type": "video_url", "value": str(tmp_path / "clip.mp4")},
                                                       {"type": "text", "value": "What happens?"}]},
                          {"role": "assistant", "content": [{"type": "text", "value": "Nothing."}]}]}]
    write_jsonl(tmp_path / "v.jsonl", rows)
    write_jsonl(tmp_path / "i.jsonl", [{"messages": [{"role": "user", "content": [
        {"type": "image_url", "value": str(SHARED_DATA / "mllm_demo_data" / "1.jpg")}]}, *rows[0]["messages"][1:]]}])
    config = write_yaml(tmp_path / "c.yaml", f"v:\n  path: {tmp_path / 'v.jsonl'}\n  source: local\n"
                                             f"i:\n  path: {tmp_path / 'i.jsonl'}\n  source: local\n")
    build(config, tmp_path / "s.db")
    render_store(RenderRequest(tmp_path / "s.db", save_qwen2_vl_folder(tmp_path / "model"), cutoff=4096, jobs=1))
    found = run_query(tmp_path / "s.db", "SELECT dataset, status, cause, detail FROM entry_lengths ORDER BY dataset")[1]
    assert found[0][:3] == ("i", "ok", None)
    assert found[1][:3] == ("v", "render_error", "media") and "torchvision" in found[1][3]


def test_header_counts_that_differ_from_the_processor_are_refused_at_spec_creation() -> None:
    image = SHARED_DATA / "mllm_demo_data" / "1.jpg"
    with Image.open(image) as opened:
        width, height = opened.size
    processor = qwen2_vl_processor()
    said = prove_header_counts(processor, [EntryMedium(0, "image", str(image), width, height)])
    assert said == "header counts equal to the processor's on 1 of 1 images (seed 0)"
    from dataidx.errors import RenderError

    with pytest.raises(RenderError, match=r"1\.jpg: the processor counts 66 tokens \(grid \[1, 12, 22\]\), its "
                                          r"header 154 tokens \(grid \[1, 28, 22\]\)"):
        prove_header_counts(processor, [EntryMedium(0, "image", str(image), 300, 400)])


def test_verify_tokens_renders_media_entries_again_with_the_processor(demos: tuple[Path, Path]) -> None:
    store, _ = demos
    result = CliRunner().invoke(cli, ["verify", str(store), "--tokens"])
    assert result.exit_code == 0, result.output
    said = "spec 'tokens': ok: 60 of 60 training entries rendered again, 0 differ from the stored tokens"
    assert said in result.output


@pytest.mark.slow  # a real PostgreSQL server
def test_a_processor_spec_in_postgresql_serves_what_a_file_serves(tmp_path: Path, demos: tuple[Path, Path]) -> None:
    from .postgres_server import running_server

    file, model = demos
    with running_server() as server:
        url = f"{server}&schema=mediarender"
        build(demo_config(tmp_path), url)
        render_store(RenderRequest(url, model, cutoff=4096, jobs=1, store_tokens=True, tokens_dir=tmp_path))
        sql = "SELECT media_id, tokens, grid_t, grid_h, grid_w FROM media_tokens ORDER BY media_id"
        assert run_query(url, sql)[1] == run_query(file, sql.replace("FROM media_tokens", "FROM media_tokens "
                                                                                          "WHERE spec = 'tokens'"))[1]
        with RenderedMixture(url, spec="default") as served, RenderedMixture(file, spec="tokens") as local:
            assert len(served) == len(local) == 60
            for ours, theirs in zip(served.get_many(list(range(60))), local.get_many(list(range(60)))):
                assert summary(ours) == summary(theirs)


def test_packing_with_merged_cuts_is_refused_for_a_processor_spec(demos: tuple[Path, Path]) -> None:
    store, _ = demos
    result = CliRunner().invoke(cli, ["pack", str(store), "--spec", "tokens", "--capacity", "1024", "--merge-cuts"])
    one_line_error(result, "spec 'tokens' renders media with a processor", "pack without --merge-cuts")


def test_info_says_a_spec_renders_media_with_its_processor(demos: tuple[Path, Path]) -> None:
    store, _ = demos
    result = CliRunner().invoke(cli, ["info", str(store)])
    assert result.exit_code == 0, result.output
    assert ("spec 'tokens': media rendered with its folder's processor, counted from headers (header counts equal to "
            "the processor's on 3 of 3 images (seed 0))") in result.output
    assert "bytes per token): its processor computes pixels on fetch" in result.output
    described = json.loads(CliRunner().invoke(cli, ["info", str(store), "--json"]).output)
    assert [spec["template"] for spec in described["render_specs"]] == ["processor", "processor"]
    assert described["render_specs"][0]["media_proof"].startswith("header counts equal")


def test_the_documented_recipe_runs_and_batches_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/rendering.md's Media recipe, as written, from a folder holding the repository's data/
    (its bash lines through the CLI, then its Python)."""
    import re

    from .helpers import REPO

    shutil.copytree(REPO / "data", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    page = (REPO / "docs" / "rendering.md").read_text(encoding="utf-8")
    section = page[page.index("## Media"):page.index("## Render specs")]
    shell, python = (re.search(rf"```{fence}\n(.*?)```", section, re.S).group(1) for fence in ("bash", "python"))
    for line in shell.strip().splitlines():
        arguments = shlex.split(line)
        assert arguments[0] == "dataidx"
        result = CliRunner().invoke(cli, arguments[1:])
        assert result.exit_code == 0, (line, result.output)
    assert "red_square.png" in result.output and "blue_bars.png" in result.output
    names: dict[str, Any] = {}
    exec(compile(python, "docs/rendering.md", "exec"), names)  # the page's own recipe
    batch = names["batch"]
    assert batch["pixel_values"].shape[0] == int(batch["image_grid_thw"].prod(dim=1).sum())
    assert batch["position_ids"].shape == (4, 3, batch["input_ids"].shape[1])
    assert batch["mm_token_type_ids"].sum() == int(batch["image_grid_thw"].prod(dim=1).sum()) // 4


def test_a_token_budget_counts_media_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mixture drawn by tokens under a processor's spec counts each image's placeholder tokens:
    the budget takes fewer entries than under a text spec (which counts an image as its
    ``<image>`` text), and what it draws is counted with them."""
    from .helpers import REPO

    shutil.copytree(REPO / "data", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["build", "data/demo_media.yaml", "-o", "m.db"]).exit_code == 0
    for spec, folder in (("media", "data/demo_vl_model"), ("text", "data/demo_tokenizer")):
        result = runner.invoke(cli, ["render", "m.db", "--tokenizer", folder, "--cutoff", "1024", "--name", spec])
        assert result.exit_code == 0, result.output
    write_yaml(tmp_path / "budget.yaml", "demo_media:\n  path: data/demo_media/conversations.jsonl\n  source: local\n"
                                         "  tokens: 300\n")
    drawn = {}
    for spec in ("media", "text"):
        result = runner.invoke(cli, ["mix", "m.db", "budget.yaml", "--name", f"by_{spec}", "--spec", spec])
        assert result.exit_code == 0, result.output
        drawn[spec] = run_query(tmp_path / "m.db", "SELECT epoch, entries, tokens FROM token_composition "
                                                   f"WHERE mixture = 'by_{spec}'")[1][0]
    lengths = run_query(tmp_path / "m.db", "SELECT spec, sum(tokens) FROM entry_lengths GROUP BY spec ORDER BY spec")[1]
    media_tokens = run_query(tmp_path / "m.db", "SELECT sum(t.tokens) FROM entry_media AS m JOIN media_tokens AS t "
                                                "ON t.media_id = m.media_id AND t.spec = 'media'")[1][0][0]
    assert lengths == [("media", 399), ("text", 271)] and media_tokens == 62  # 4 images' runs, 6 entries
    assert drawn["media"][1:] == (4, 276)  # 300 tokens hold 4 of the 6 entries with their images
    assert drawn["text"][1] > 6  # as text, the 6 entries are 271 tokens: the budget repeats them

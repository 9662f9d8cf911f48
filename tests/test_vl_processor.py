"""A Qwen2-VL-style processor without torchvision (issue 53's groundwork): it builds, it is saved
to a model folder and loaded back by ``dataidx.render.processor_folder``, what cannot load is
refused in one line naming the file, and LLaMA-Factory v1's own Renderer (DATAIDX_LLAMAFACTORY,
its src at ff6d4d12) renders every entry of v1_multimodal_demo and mllm_demo with it: placeholder
counts, grids (equal to the count from the image's header alone), pixel rows and labels as they
must be, and the same with the processor loaded from a folder, entry for entry. What v1 made is
recorded in tests/conformance/golden/qwen2_vl_demo.json (digests and shapes, no data)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dataidx.errors import RenderError
from dataidx.render.media_tokens import qwen2_vl_grid
from dataidx.render.processor_folder import load_processor

from .conformance import GOLDEN, digest
from .conformance.v1 import v1_render, v1_renderer_class
from .helpers import SHARED_DATA, train_tokenizer
from .vl_processor import DEMOS, QWEN2_VL_TEMPLATE, demo_entries, qwen2_vl_processor, save_qwen2_vl_folder

pytest.importorskip("PIL")

RECORD = GOLDEN / "qwen2_vl_demo.json"
IGNORE = -100


def one_image_text(processor: Any, image: Any) -> Any:
    text = "hello <|vision_start|><|image_pad|><|vision_end|> world"
    return processor(text=text, images=[image], return_tensors="pt")


def test_the_processor_builds_without_a_video_processor_and_expands_images() -> None:
    from PIL import Image

    processor = qwen2_vl_processor()
    assert not hasattr(processor, "video_processor")
    assert processor.chat_template == QWEN2_VL_TEMPLATE
    made = one_image_text(processor, Image.new("RGB", (300, 168)))
    ids = made["input_ids"][0].tolist()
    grid = qwen2_vl_grid(300, 168)
    assert made["image_grid_thw"].tolist() == [[grid.t, grid.h, grid.w]]
    assert ids.count(processor.image_token_id) == grid.tokens
    assert made["mm_token_type_ids"][0].tolist() == [int(i == processor.image_token_id) for i in ids]
    assert tuple(made["pixel_values"].shape) == (grid.t * grid.h * grid.w, 3 * 2 * 14 * 14)
    with pytest.raises(RenderError, match="videos need Qwen2-VL's video processor, which needs torchvision"):
        processor(text="<|video_pad|>", videos=[[Image.new("RGB", (56, 56))] * 2])


@pytest.mark.parametrize("layout", ["model folder", "save_pretrained"])
def test_a_saved_processor_loads_back_from_its_folder(tmp_path: Path, layout: str) -> None:
    from PIL import Image

    built = qwen2_vl_processor()
    if layout == "model folder":  # preprocessor_config.json and chat_template.json, as Qwen2-VL ships
        save_qwen2_vl_folder(tmp_path)
    else:  # processor_config.json with the image processor in it, chat_template.jinja
        built.save_pretrained(tmp_path)
    loaded = load_processor(tmp_path)
    assert loaded.chat_template == QWEN2_VL_TEMPLATE
    assert loaded.tokenizer.get_vocab() == built.tokenizer.get_vocab()
    assert loaded.image_processor.to_dict() == built.image_processor.to_dict()
    image = Image.new("RGB", (211, 97), (10, 200, 30))
    ours, theirs = one_image_text(loaded, image), one_image_text(built, image)
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key].tolist() == theirs[key].tolist(), key


def torchvision_loads() -> bool:
    try:
        import torchvision  # noqa: F401  (only whether it loads)
    except Exception:
        return False
    return True


@pytest.mark.skipif(torchvision_loads(), reason="torchvision loads here: AutoProcessor builds the whole processor")
def test_without_torchvision_autoprocessor_fails_where_load_processor_loads(tmp_path: Path) -> None:
    from transformers import AutoProcessor

    folder = save_qwen2_vl_folder(tmp_path)
    with pytest.raises(ImportError, match="Qwen2VLVideoProcessor requires the Torchvision library"):
        AutoProcessor.from_pretrained(str(folder), local_files_only=True)
    assert load_processor(folder).image_processor.__class__.__name__ == "Qwen2VLImageProcessorPil"


@pytest.mark.skipif(not torchvision_loads(), reason="torchvision does not load here (issue 53: the registries offer "
                    "only a CUDA build, which the CPU torch does not load)")
def test_with_torchvision_autoprocessor_gives_the_same_ids_and_grids(tmp_path: Path) -> None:
    """What a machine with torchvision gets: the video processor besides, the same ids and grids,
    pixel values within the resampling's difference (the torchvision backend resizes its own way)."""
    from PIL import Image
    from transformers import AutoProcessor

    folder = save_qwen2_vl_folder(tmp_path)
    auto, ours = AutoProcessor.from_pretrained(str(folder), local_files_only=True), load_processor(folder)
    assert auto.video_processor is not None and auto.chat_template == ours.chat_template
    for size in ((300, 168), (211, 97), (1200, 40), (28, 28)):
        image = Image.new("RGB", size, (10, 200, 30))
        theirs, mine = one_image_text(auto, image), one_image_text(ours, image)
        for key in ("input_ids", "image_grid_thw", "mm_token_type_ids"):
            assert theirs[key].tolist() == mine[key].tolist(), (size, key)
        assert (theirs["pixel_values"] - mine["pixel_values"]).abs().max() < 0.1, size


def test_what_cannot_load_is_refused_naming_the_file(tmp_path: Path) -> None:
    def refused(folder: Path, pattern: str) -> None:
        with pytest.raises(RenderError, match=pattern) as caught:
            load_processor(folder)
        assert "\n" not in str(caught.value)

    refused(tmp_path / "absent", "absent: not a folder")
    folder = save_qwen2_vl_folder(tmp_path / "model")
    config = folder / "preprocessor_config.json"
    settings = json.loads(config.read_text())
    config.write_text(json.dumps({**settings, "image_processor_type": "CLIPImageProcessor"}))
    refused(folder, r"preprocessor_config.json: image_processor_type 'CLIPImageProcessor': only Qwen2-VL's")
    config.write_text("{not json")
    refused(folder, "preprocessor_config.json: not JSON")
    config.write_text(json.dumps({**settings, "patch_size": "fourteen"}))
    refused(folder, "preprocessor_config.json: image processor patch_size 'fourteen': not a positive integer")
    config.unlink()
    refused(folder, "no preprocessor_config.json")
    os.mkfifo(config)  # transformers would block on it for ever
    refused(folder, "preprocessor_config.json: not a regular file")
    config.unlink()
    config.write_text(json.dumps(settings))
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": 3}))
    refused(folder, "chat_template.json: its chat_template is not a string")
    plain = tmp_path / "plain"  # a tokenizer without the vision tokens
    train_tokenizer(plain)
    (plain / "preprocessor_config.json").write_text(json.dumps(settings))
    refused(plain, r"plain: the tokenizer has no <\|image_pad\|> and no <\|video_pad\|> token")


def summary(made: dict[str, Any]) -> dict[str, Any]:
    """What v1 made of an entry, recorded: ids and labels (a digest), pixel values (shape and a
    digest of their float32 bytes), grids, and where the image tokens are."""
    pixels = made["pixel_values"]
    return {"ids": digest(made["input_ids"], made["labels"], made["loss_weights"]), "length": len(made["input_ids"]),
            "pixel_values": [list(pixels.shape), hashlib.sha256(pixels.float().numpy().tobytes()).hexdigest()[:12]],
            "image_grid_thw": made["image_grid_thw"].tolist(), "image_tokens": made["mm_token_type_ids"].count(1)}


def image_sizes(sample: dict[str, Any]) -> list[tuple[int, int]]:
    from PIL import Image

    sizes = []
    for message in sample["messages"]:
        for content in message["content"]:
            if content["type"] == "image_url":
                with Image.open(content["value"]) as image:
                    sizes.append(image.size)  # the header's: nothing decoded
    return sizes


def check_entry(made: dict[str, Any], sample: dict[str, Any], processor: Any) -> None:
    """What must hold of a multimodal entry v1 rendered."""
    ids, labels, image = made["input_ids"], made["labels"], processor.image_token_id
    grids = [qwen2_vl_grid(width, height) for width, height in image_sizes(sample)]
    assert made["image_grid_thw"].tolist() == [[grid.t, grid.h, grid.w] for grid in grids]  # header = processor
    # One <|vision_start|> ... <|vision_end|> run of image_pad per image, grid product / merge_size**2 long.
    start, end = (processor.tokenizer.convert_tokens_to_ids(token) for token in ("<|vision_start|>", "<|vision_end|>"))
    runs = [ids[at + 1:ids.index(end, at)] for at, token in enumerate(ids) if token == start]
    assert [len(run) for run in runs] == [grid.tokens for grid in grids]
    assert all(set(run) == {image} for run in runs)
    assert ids.count(image) == sum(grid.tokens for grid in grids)
    assert made["mm_token_type_ids"] == [int(token == image) for token in ids]
    assert tuple(made["pixel_values"].shape) == (sum(grid.t * grid.h * grid.w for grid in grids), 1176)
    # Labels only after the prompt: a run of IGNORE, then the answer's ids (no image token in it).
    first = next(at for at, label in enumerate(labels) if label != IGNORE)
    assert set(labels[:first]) == {IGNORE} and labels[first:] == ids[first:]
    assert image not in ids[first:]
    assert processor.tokenizer.decode(ids[first:]).endswith("<|im_end|>\n")


@pytest.fixture(scope="module")
def v1_renderers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Any]:
    """v1's Renderer on the processor built here, and on the same loaded back from a folder."""
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    if not source:
        pytest.skip("DATAIDX_LLAMAFACTORY does not name LLaMA-Factory's src (ff6d4d12)")
    if not (SHARED_DATA / "mllm_demo_data").is_dir():
        pytest.skip("../shared/data is not beside the repo")
    renderer = v1_renderer_class(Path(source))
    processor = qwen2_vl_processor()
    loaded = load_processor(save_qwen2_vl_folder(tmp_path_factory.mktemp("qwen2-vl")))
    return renderer(processor), renderer(loaded), processor


@pytest.mark.slow  # 60 multimodal entries through v1's Renderer, twice
@pytest.mark.parametrize("name", list(DEMOS))
def test_v1_renders_every_demo_entry_with_the_processor(v1_renderers: tuple[Any, Any, Any], name: str) -> None:
    built, loaded, processor = v1_renderers
    recorded = json.loads(RECORD.read_text(encoding="utf-8")).get(name) if RECORD.is_file() else None
    summaries = []
    for row, cut, sample in demo_entries(name):
        made, again = v1_render(built, sample), v1_render(loaded, sample)
        assert not isinstance(made, BaseException), f"{name} row {row} cut {cut}: v1 refused it: {made}"
        assert not isinstance(again, BaseException), f"{name} row {row} cut {cut}: refused when loaded: {again}"
        check_entry(made, sample, processor)
        summaries.append({"row": row, "cut": cut, **summary(made)})
        assert summary(again) == summary(made), f"{name} row {row} cut {cut}: the loaded processor differs"
    assert len(summaries) == {"v1_multimodal_demo": 48, "mllm_demo": 12}[name]
    if os.environ.get("DATAIDX_RECORD"):
        record = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file() else {}
        record[name] = summaries
        blocks = [f" {json.dumps(key)}: [\n" + ",\n".join(f"  {json.dumps(entry)}" for entry in entries) + "\n ]"
                  for key, entries in record.items()]  # one entry a line: a diff shows which changed
        RECORD.write_text("{\n" + ",\n".join(blocks) + "\n}\n", encoding="utf-8")
    elif recorded is not None:
        assert summaries == recorded


@pytest.mark.slow  # v1's Renderer (its fixture builds two processors)
def test_v1_escapes_a_literal_placeholder_and_the_processor_refuses_videos(v1_renderers: tuple[Any, Any, Any]) -> None:
    built, _, processor = v1_renderers
    _, _, sample = demo_entries("mllm_demo")[0]
    text = {"type": "text", "value": "what is <|image_pad|> here?"}  # data text: never a placeholder
    first = sample["messages"][0]
    tricked = {**sample, "messages": [{**first, "content": [*first["content"], text]}, *sample["messages"][1:]]}
    made, plain = v1_render(built, tricked), v1_render(built, sample)
    assert not isinstance(made, BaseException) and not isinstance(plain, BaseException)
    assert made["input_ids"].count(processor.image_token_id) == plain["input_ids"].count(processor.image_token_id)
    check_entry(made, tricked, processor)
    video = {"type": "video_url", "value": str(SHARED_DATA / "mllm_demo_data" / "1.jpg")}
    refused = v1_render(built, {**sample, "messages": [{**first, "content": [video]}, *sample["messages"][1:]]})
    assert isinstance(refused, RenderError) and "needs torchvision" in str(refused)

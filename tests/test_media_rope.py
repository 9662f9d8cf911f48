"""Packs of Qwen2-VL entries with their images (issue 53, beyond LLaMA-Factory v1, which refuses
packing multimodal entries): each sample's 3-D positions are what the model itself computes for
that sample alone, and a pack loses exactly what its entries lose one at a time, on a tiny
random-weight Qwen2-VL built here from a config (no weights downloaded), in float64.

Entries are the multimodal demos rendered by the processor of tests/vl_processor.py through its
chat template, and small made-up images (several a sample) to keep grids and forwards small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from dataidx.training import Collator, model_inputs
from dataidx.training.media_rope import mrope_positions

from .helpers import SHARED_DATA
from .vl_processor import demo_entries, hf_messages, qwen2_vl_processor

pytest.importorskip("PIL")
requires_demos = pytest.mark.skipif(not (SHARED_DATA / "mllm_demo_data").is_dir(),
                                    reason="../shared/data is not beside the repo")

IGNORE = -100
#: A pack's summed loss against its entries' summed losses: float64 weights and activations, and
#: the same positions either way (transformers computes RoPE's cos and sin in float32 from them,
#: alike for both). SDPA then differs by the order of sums (measured 0 and 2e-16 relative); eager
#: attention takes its softmax in float32 (``eager_attention_forward``), rows of other lengths
#: rounding otherwise (measured 1e-10). Samples that attend to one another differ by 5e-4 to 2e-3.
RELATIVE = 1e-8


def render(processor: Any, sample: dict[str, Any], *, all_labelled: bool = False) -> dict[str, Any]:
    """Model inputs of one entry: the processor's over the chat template's text, labels on the
    last assistant turn (every token with ``all_labelled``, as a pack's later sample whose first
    label must be dropped)."""
    messages, images = hf_messages(sample)
    prompt = processor.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    text = processor.apply_chat_template(messages, tokenize=False)
    assert text.startswith(prompt)
    media = {"images": images} if images else {}
    made = processor(text=text, return_tensors="pt", **media)
    prompt_length = processor(text=prompt, return_tensors="pt", **media)["input_ids"].shape[1]
    ids = made["input_ids"][0]
    labels = ids.clone()
    if not all_labelled:
        labels[:prompt_length] = IGNORE
    rendered = {"input_ids": ids.tolist(), "labels": labels.tolist(), "loss_weights": [float(label != IGNORE)
                                                                                       for label in labels.tolist()],
                "mm_token_type_ids": made["mm_token_type_ids"][0].tolist()}
    if images:
        rendered.update(pixel_values=made["pixel_values"], image_grid_thw=made["image_grid_thw"])
    return rendered


def made_up(sizes: list[tuple[int, int]], question: str, answer: str) -> dict[str, Any]:
    """A v1 sample asking about small plain images of ``sizes`` (none: a text-only sample)."""
    from PIL import Image

    images = [{"type": "image_url", "value": Image.new("RGB", size, (40 * n, 90, 200 - 30 * n))}
              for n, size in enumerate(sizes)]
    return {"messages": [{"role": "user", "content": [*images, {"type": "text", "value": question}]},
                         {"role": "assistant", "content": [{"type": "text", "value": answer}]}]}


@pytest.fixture(scope="module")
def processor() -> Any:
    return qwen2_vl_processor()


@pytest.fixture(scope="module")
def model(processor: Any) -> Any:
    """A tiny Qwen2-VL with random weights, seeded, in float64, its vocabulary the processor's."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    tokenizer = processor.tokenizer
    ids = {f"{name}_token_id": tokenizer.convert_tokens_to_ids(f"<|{token}|>") for name, token in
           (("image", "image_pad"), ("video", "video_pad"), ("vision_start", "vision_start"),
            ("vision_end", "vision_end"))}
    text = {"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "bos_token_id": None, "eos_token_id": None,
            # head_dim 16: M-RoPE's temporal, height and width sections share its 8 frequencies
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
    # Patches of 14 and 2 frames, merged 2 by 2 (the defaults): the processor's.
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2}
    torch.manual_seed(0)
    config = Qwen2VLConfig(text_config=text, vision_config=vision, **ids)
    return Qwen2VLForConditionalGeneration(config).double().eval()


@pytest.fixture(scope="module")
def entries(processor: Any) -> list[dict[str, Any]]:
    """Three multimodal entries (one, two and three images) and a text-only one, fully labelled."""
    samples = [made_up([(56, 84)], "What colour?", "Blue, mostly."),
               made_up([(84, 56), (112, 56)], "Which is wider?", "The second one."),
               made_up([(56, 56), (84, 140), (28, 56)], "How many?", "Three images.")]
    rendered = [render(processor, sample) for sample in samples]
    return [*rendered, render(processor, made_up([], "Say hi.", "Hi!"), all_labelled=True)]


@pytest.fixture(scope="module")
def demo_pack(processor: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two demo entries (two turns with two images, then one with one image), the made-up entry
    with three images, and the text-only one."""
    if not (SHARED_DATA / "mllm_demo_data").is_dir():
        pytest.skip("../shared/data is not beside the repo")
    two_images = next(sample for _, cut, sample in demo_entries("v1_multimodal_demo") if cut == 4)
    one_image = next(sample for row, cut, sample in demo_entries("mllm_demo") if (row, cut) == (1, 2))
    return [render(processor, two_images), render(processor, one_image), *entries[2:]]


def rope_index(model: Any, sample: dict[str, Any]) -> torch.Tensor:
    """The model's own ``(3, length)`` positions of one sample alone."""
    grids = sample.get("image_grid_thw")
    positions, _ = model.model.get_rope_index(torch.tensor([sample["input_ids"]]),
                                              torch.as_tensor(sample["mm_token_type_ids"]).reshape(1, -1),
                                              image_grid_thw=grids)
    return positions[:, 0]


def summed_loss(model: Any, inputs: dict[str, Any], labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over labelled tokens, one token shifted, computed here from logits."""
    with torch.no_grad():
        logits = model(**inputs).logits
    return F.cross_entropy(logits[0, :-1], labels[0, 1:], ignore_index=IGNORE, reduction="sum")


def alone(model: Any, sample: dict[str, Any]) -> torch.Tensor:
    """One entry's loss through the model by itself, its positions the model's own."""
    inputs = {"input_ids": torch.tensor([sample["input_ids"]]),
              "mm_token_type_ids": torch.tensor([sample["mm_token_type_ids"]])}
    if "pixel_values" in sample:
        inputs.update(pixel_values=sample["pixel_values"], image_grid_thw=sample["image_grid_thw"])
    return summed_loss(model, inputs, torch.tensor([sample["labels"]]))


def pack_media(entries: list[dict[str, Any]], mask_dtype: torch.dtype | None = None) -> dict[str, Any]:
    """One packed row of ``entries`` as the Collator lays it out (what ``PackedDataset`` serves):
    with ``mask_dtype``, the model's inputs with the 4-D block mask :func:`model_inputs` gives;
    without, no mask (transformers finds the samples in the text row) and no cache."""
    batch = Collator(pad_token_id=0, weighted=True)([entries])
    inputs = model_inputs(batch, mask_dtype) if mask_dtype is not None else {
        **{key: value for key, value in model_inputs(batch).items() if key != "attention_mask"}, "use_cache": False}
    return {**inputs, "labels": batch["labels"], "sample_ids": batch["sample_ids"]}


def packed_loss(model: Any, pack: dict[str, Any], **changed: Any) -> torch.Tensor:
    """A pack's loss, with ``changed`` inputs (other positions, a cache) to show what they break."""
    inputs = {key: value for key, value in pack.items() if key not in ("labels", "sample_ids")}
    return summed_loss(model, {**inputs, **changed}, pack["labels"])


def test_positions_are_the_models_own_for_each_sample_alone(processor: Any, model: Any,
                                                            entries: list[dict[str, Any]]) -> None:
    image = processor.image_token_id
    for sample in entries:
        mine = mrope_positions(sample["input_ids"], sample.get("image_grid_thw", []), image)
        assert torch.equal(mine, rope_index(model, sample))
    assert len(entries[2]["image_grid_thw"]) == 3 and "image_grid_thw" not in entries[3]


@requires_demos
@pytest.mark.parametrize("name", ["v1_multimodal_demo", "mllm_demo"])
def test_positions_are_the_models_own_for_every_demo_entry(processor: Any, model: Any, name: str) -> None:
    """Real images (300 by about 170: grids of 12 by 22 patches), one or two an entry."""
    counts = set()
    for _, _, sample in demo_entries(name):
        rendered = render(processor, sample)
        counts.add(len(rendered["image_grid_thw"]))
        positions = mrope_positions(rendered["input_ids"], rendered["image_grid_thw"], processor.image_token_id)
        assert torch.equal(positions, rope_index(model, rendered))
    assert counts == {1, 2}


def test_tokens_that_do_not_match_the_grids_are_refused(processor: Any, entries: list[dict[str, Any]]) -> None:
    sample, image = entries[1], processor.image_token_id
    with pytest.raises(ValueError, match="not one run per grid"):
        mrope_positions(sample["input_ids"], sample["image_grid_thw"][:1], image)  # too few grids
    split = list(sample["input_ids"])
    first = split.index(image)
    split[first + 1] = 0  # an image's tokens broken by text
    with pytest.raises(ValueError, match="not one run per grid"):
        mrope_positions(split, sample["image_grid_thw"], image)


def test_a_pack_lays_its_samples_end_to_end(processor: Any, model: Any, entries: list[dict[str, Any]]) -> None:
    pack = pack_media(entries)
    lengths = [len(sample["input_ids"]) for sample in entries]
    starts = [sum(lengths[:n]) for n in range(len(lengths))]
    assert pack["input_ids"][0].tolist() == [token for sample in entries for token in sample["input_ids"]]
    assert pack["position_ids"].shape == (4, 1, sum(lengths))
    for sample, start, length in zip(entries, starts, lengths):
        assert pack["position_ids"][0, 0, start:start + length].tolist() == list(range(length))
        assert torch.equal(pack["position_ids"][1:, 0, start:start + length], rope_index(model, sample))
    assert pack["labels"][0, starts[3]] == IGNORE != entries[3]["labels"][0]  # predicted from the sample before
    assert pack["labels"][0, starts[3] + 1:].tolist() == entries[3]["labels"][1:]
    assert torch.equal(pack["pixel_values"], torch.cat([sample["pixel_values"] for sample in entries[:3]]))
    grids = [row for sample in entries[:3] for row in sample["image_grid_thw"].tolist()]
    assert pack["image_grid_thw"].tolist() == grids
    assert pack["mm_token_type_ids"][0].tolist() == [int(token == processor.image_token_id)
                                                     for token in pack["input_ids"][0].tolist()]
    assert pack["sample_ids"][0].tolist() == [number for number, length in enumerate(lengths, 1)
                                              for _ in range(length)]


@pytest.mark.parametrize("which", ["made-up entries", "demo entries"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("mask", ["from text positions", "4-D block mask"])
def test_a_pack_loses_what_its_entries_lose_alone(request: pytest.FixtureRequest, processor: Any, model: Any,
                                                  which: str, attention: str, mask: str) -> None:
    """Without a mask transformers finds the samples in the text row of the positions; with one,
    the mask keeps them apart (additive: eager attention adds it to its scores)."""
    entries = request.getfixturevalue("entries" if which == "made-up entries" else "demo_pack")
    assert [len(sample.get("image_grid_thw", [])) for sample in entries] in ([1, 2, 3, 0], [2, 1, 3, 0])
    model.set_attn_implementation(attention)
    mask_dtype = torch.float64 if mask == "4-D block mask" else None
    pack = pack_media(entries, mask_dtype)
    assert ("attention_mask" in pack) == (mask_dtype is not None)
    expected = sum(alone(model, sample) for sample in entries)
    assert torch.isclose(packed_loss(model, pack), expected, rtol=RELATIVE, atol=0)


def test_samples_attend_to_one_another_without_restarted_positions_or_with_a_cache(
        processor: Any, model: Any, entries: list[dict[str, Any]]) -> None:
    """What the equality above catches: continuous positions (the model's own for the whole row),
    M-RoPE's rows without the text row, or a cache (the model's default: packed samples are then not
    looked for) let each sample attend to the ones before it."""
    model.set_attn_implementation("sdpa")
    pack = pack_media(entries)
    expected = sum(alone(model, sample) for sample in entries)
    whole = rope_index(model, {**pack, "input_ids": pack["input_ids"][0].tolist(),
                               "mm_token_type_ids": pack["mm_token_type_ids"][0]})[:, None]
    continuous = torch.cat([torch.arange(whole.shape[-1])[None, None], whole])
    broken = {"continuous positions": packed_loss(model, pack, position_ids=continuous),
              "no text row": packed_loss(model, pack, position_ids=pack["position_ids"][1:]),
              "a cache": packed_loss(model, pack, use_cache=True)}
    for why, loss in broken.items():
        assert not torch.isclose(loss, expected, rtol=1e-5, atol=0), why
    # Rotary positions are relative: M-RoPE's rows continuous across the pack (each sample's shifted
    # by one constant) lose the same once the text row keeps samples apart, up to the float32 in
    # which transformers computes cos and sin of the (larger) positions.
    shifted = torch.cat([pack["position_ids"][:1], whole])
    assert torch.isclose(packed_loss(model, pack, position_ids=shifted), expected, rtol=1e-6, atol=0)


@requires_demos
@pytest.mark.parametrize("tokens", [False, True], ids=["rendered on fetch", "stored tokens"])
def test_packs_of_a_plan_train_as_their_entries_alone(tmp_path: Path, processor: Any, model: Any,
                                                      tokens: bool) -> None:
    """The product's path: the demos built, rendered with the processor's folder, packed by
    ``dataidx pack``; each pack ``PackedDataset`` serves (features computed on fetch) and the
    Collator lays out loses what its entries lose one at a time; a padded batch of the same
    entries (positions (4, rows, width)) loses it row by row."""
    from dataidx.index import build
    from dataidx.pack import pack_store
    from dataidx.render import render_store
    from dataidx.render.request import RenderRequest
    from dataidx.training import PackedDataset

    from .test_media_render import demo_config
    from .vl_processor import save_qwen2_vl_folder

    build(demo_config(tmp_path), tmp_path / "s.db")
    render_store(RenderRequest(tmp_path / "s.db", save_qwen2_vl_folder(tmp_path / "model"), cutoff=1024, jobs=1,
                               store_tokens=tokens))
    assert pack_store(tmp_path / "s.db", "default", capacity=1024).packs > 0
    model.set_attn_implementation("sdpa")
    with PackedDataset(tmp_path / "s.db") as packs:
        served = [packs[k] for k in range(2)]
    for pack in served:
        assert len(pack) > 1 and all("pixel_values" in sample for sample in pack)
        expected = sum(alone(model, sample) for sample in pack)
        assert torch.isclose(packed_loss(model, pack_media(pack, torch.float64)), expected, rtol=RELATIVE, atol=0)
        batch = Collator(pad_token_id=0, weighted=True)(pack)
        assert batch["position_ids"].shape == (4, len(pack), batch["input_ids"].shape[1])
        with torch.no_grad():
            logits = model(**model_inputs(batch)).logits
        for row, sample in enumerate(pack):
            loss = F.cross_entropy(logits[row, :-1], batch["labels"][row, 1:], ignore_index=IGNORE, reduction="sum")
            assert torch.isclose(loss, alone(model, sample), rtol=RELATIVE, atol=0)

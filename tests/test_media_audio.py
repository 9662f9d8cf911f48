"""Audio entries rendered with a Qwen2-Audio-style processor's folder (issue 53): counted from the
WAV header (samples and rate), served with Whisper's features computed on fetch, equal to
LLaMA-Factory v1's Renderer entry for entry on generated clips (short, mono and stereo, two in
one conversation, past Whisper's 30 s), truncated as v1's ``_align_audio`` truncates, batched
with v1's dummy audio fragment.

v1 loads audio with torchaudio (``_load_audios``), which has no build for this torch on the
registries; given decoded waveforms (numpy arrays, which ``_load_audios`` passes through) it calls
none of it, but imports it first. So with DATAIDX_LLAMAFACTORY naming v1's src, v1's Renderer
runs here with an empty ``torchaudio`` module in place for its import alone, on the waveforms
torchaudio's ``load`` would give (samples / 32768, channels averaged); what it made is recorded
in tests/conformance/golden/qwen2_audio_clips.json (with DATAIDX_RECORD set), which the tests
hold served entries to without the source.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from dataidx import Collator, DataEngine
from dataidx.index import build
from dataidx.render import render_store
from dataidx.render.request import RenderRequest
from dataidx.render.served import RenderedMixture
from dataidx.store import run_query

from .conformance import GOLDEN, digest
from .conformance.v1 import v1_renderer_class
from .helpers import write_jsonl, write_yaml
from .vl_processor import qwen2_audio_processor, save_qwen2_audio_folder, write_clip

RECORD = GOLDEN / "qwen2_audio_clips.json"
IGNORE = -100
#: The clips: seconds, channels, seed (a tone plus noise each).
CLIPS = {"short.wav": (0.5, 1, 1), "three.wav": (3.0, 1, 2), "stereo.wav": (2.0, 2, 3), "long.wav": (31.0, 1, 4)}


def message(role: str, *blocks: tuple[str, str]) -> dict[str, Any]:
    return {"role": role, "content": [{"type": kind, "value": value} for kind, value in blocks]}


def clip_rows(folder: Path) -> list[dict[str, Any]]:
    path = {name: str(folder / name) for name in CLIPS}
    return [
        {"messages": [message("user", ("audio_url", path["short.wav"]), ("text", "What is it?")),
                      message("assistant", ("text", "A tone."))]},
        {"messages": [message("user", ("text", "Listen:"), ("audio_url", path["three.wav"])),
                      message("assistant", ("text", "Noise over a tone.")),
                      message("user", ("audio_url", path["stereo.wav"]), ("text", "And this one?")),
                      message("assistant", ("text", "Two channels."))]},
        {"messages": [message("user", ("audio_url", path["long.wav"])),
                      message("assistant", ("text", "Thirty seconds of it at most."))]},
    ]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The clips written, a store of their rows rendered with the audio folder (tokens stored under
    spec ``tokens``); ``(folder, store, waveforms by file name)``."""
    folder = tmp_path_factory.mktemp("audio")
    waves = {name: write_clip(folder / name, seconds, channels=channels, seed=seed)
             for name, (seconds, channels, seed) in CLIPS.items()}
    write_jsonl(folder / "a.jsonl", clip_rows(folder))
    build(write_yaml(folder / "c.yaml", f"clips:\n  path: {folder / 'a.jsonl'}\n  source: local\n"), folder / "s.db")
    model = save_qwen2_audio_folder(folder / "model")
    render_store(RenderRequest(folder / "s.db", model, cutoff=4096, jobs=1))
    render_store(RenderRequest(folder / "s.db", model, cutoff=4096, jobs=1, name="tokens", store_tokens=True))
    return folder, folder / "s.db", waves


def summary(made: dict[str, Any]) -> dict[str, Any]:
    """What must be equal of an audio entry: ids, labels and weights (a digest), the features
    (shape and a digest of their float32 bytes), frames per clip, and which tokens are audio."""
    features = made["input_features"]
    return {"ids": digest(made["input_ids"], made["labels"], made["loss_weights"]), "length": len(made["input_ids"]),
            "input_features": [list(features.shape),
                               hashlib.sha256(features.float().numpy().tobytes()).hexdigest()[:12]],
            "frames": made["feature_attention_mask"].sum(-1).tolist(),
            "audio_runs": runs([at for at, kind in enumerate(made["mm_token_type_ids"]) if kind == 3])}


def runs(positions: list[int]) -> list[list[int]]:
    """Positions as ``[first, count]`` runs."""
    found: list[list[int]] = []
    for at in positions:
        if found and found[-1][0] + found[-1][1] == at:
            found[-1][1] += 1
        else:
            found.append([at, 1])
    return found


@contextmanager
def torchaudio_for_its_import() -> Iterator[None]:
    """An empty ``torchaudio`` while v1 runs: ``_load_audios`` imports it, and calls none of it
    for waveforms given as arrays (module docstring)."""
    shim = types.ModuleType("torchaudio")
    shim.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules["torchaudio"] = shim
    try:
        yield
    finally:
        del sys.modules["torchaudio"]


def v1_sample(row: dict[str, Any], cut: int, waves: dict[str, Any]) -> dict[str, Any]:
    """An entry as v1 takes it: the row cut, each audio block's value the decoded waveform."""
    messages = json.loads(json.dumps(row["messages"][:cut]))
    for one in messages:
        for block in one["content"]:
            if block["type"] == "audio_url":
                block["value"] = waves[Path(block["value"]).name]
    return {"messages": messages}


def v1_renderer() -> Any | None:
    source = os.environ.get("DATAIDX_LLAMAFACTORY")
    return v1_renderer_class(Path(source))(qwen2_audio_processor()) if source else None


@pytest.mark.parametrize("spec", ["default", "tokens"])
def test_served_audio_entries_are_v1s(clips: tuple[Path, Path, dict[str, Any]], spec: str) -> None:
    folder, store, waves = clips
    with RenderedMixture(store, spec=spec) as served:
        triples = served.reader.triples(list(range(len(served))))
        entries = served.get_many(list(range(len(served))))
    found = {f"{row}/{cut}": summary(entry) for (_, row, cut), entry in zip(triples, entries)}
    assert len(found) == 4
    renderer, rows = v1_renderer(), clip_rows(folder)
    if renderer is not None:
        with torchaudio_for_its_import():
            theirs = {key: summary(renderer.process_samples([v1_sample(rows[int(key.split("/")[0])],
                                                                       int(key.split("/")[1]), waves)])[0])
                      for key in found}
        assert found == theirs
        if os.environ.get("DATAIDX_RECORD"):  # what v1 made, recorded for runs without its source
            RECORD.write_text(json.dumps(theirs, sort_keys=True) + "\n", encoding="utf-8")
    assert found == json.loads(RECORD.read_text(encoding="utf-8"))
    lengths = run_query(store, f"SELECT row, cut, tokens FROM entry_lengths WHERE spec = '{spec}'")[1]
    assert {f"{row}/{cut}": tokens for row, cut, tokens in lengths} == {key: value["length"]
                                                                        for key, value in found.items()}


def test_counts_come_from_the_header_and_are_proven(clips: tuple[Path, Path, dict[str, Any]]) -> None:
    _, store, _ = clips
    rows = run_query(store, "SELECT path, tokens, frames, grid_t FROM media_tokens WHERE spec = 'default' "
                            "ORDER BY path")[1]
    frames = {name: min(-(-int(seconds * 16000) // 160), 3000) for name, (seconds, _, _) in CLIPS.items()}
    assert [(Path(path).name, tokens, count, grid) for path, tokens, count, grid in rows] == sorted(
        (name, ((n - 1) // 2 + 1 - 2) // 2 + 1, n, None) for name, n in frames.items())
    proof = run_query(store, "SELECT media_proof FROM render_specs WHERE name = 'default'")[1][0][0]
    assert proof == "header counts equal to the processor's on 4 of 4 audios (seed 0)"


def test_truncation_drops_the_clip_crossing_the_cutoff_as_v1(clips: tuple[Path, Path, dict[str, Any]],
                                                             tmp_path: Path) -> None:
    """Row 1's second entry (208 tokens) holds two clips (75 and 50 tokens); cut at 150 from the
    start, the second clip's run crosses the cutoff and is dropped (its tokens inside the window id
    0, unlabelled) and the answer is past it; from the end, the first clip's run is cut and dropped,
    and the entry trains with the second."""
    folder, _, waves = clips
    store = tmp_path / "s.db"
    build(write_yaml(tmp_path / "c.yaml", f"clips:\n  path: {folder / 'a.jsonl'}\n  source: local\n"), store)
    model = save_qwen2_audio_folder(tmp_path / "model")
    render_store(RenderRequest(store, model, cutoff=150, truncation="right", jobs=1, name="right"))
    render_store(RenderRequest(store, model, cutoff=150, truncation="left", jobs=1, name="left"))
    statuses = run_query(store, "SELECT spec, row, cut, status, full_tokens FROM entry_lengths WHERE row = 1 "
                                "ORDER BY spec, cut")[1]
    assert statuses == [("left", 1, 2, "ok", 124), ("left", 1, 4, "truncated", 208),
                        ("right", 1, 2, "ok", 124), ("right", 1, 4, "no_supervision", 208)]
    with RenderedMixture(store, spec="left") as served:
        cuts = [(row, cut) for _, row, cut in served.reader.triples(list(range(len(served))))]
        entry = served.get(cuts.index((1, 4)))
    audio = qwen2_audio_processor().audio_token_id
    assert len(entry["input_ids"]) == 150 and entry["input_ids"].count(audio) == 50  # the stereo clip alone
    assert entry["feature_attention_mask"].sum(-1).tolist() == [200]
    assert torch.equal(entry["input_features"], qwen2_audio_processor().feature_extractor(
        [waves["stereo.wav"]], sampling_rate=16000, return_attention_mask=True, padding="max_length",
        return_tensors="pt")["input_features"])
    renderer = v1_renderer()
    if renderer is not None:  # right truncation, as v1's collation truncates the whole entry
        from llamafactory.v1.core.utils.collation import pad_and_truncate  # type: ignore[import-not-found]

        from dataidx.render.media_render import MediaRenderer
        from dataidx.render.renderer import Renderer

        sample = v1_sample(clip_rows(folder)[1], 4, waves)
        with torchaudio_for_its_import():
            theirs = pad_and_truncate([renderer.process_samples([sample])[0]], 150)[0]
        processor = qwen2_audio_processor()
        ours = MediaRenderer(processor, Renderer(processor.tokenizer, processor.chat_template, 150, "right"))
        from dataidx.render.media_families import EntryMedium

        media = [EntryMedium(0, "audio", "three.wav", samples=48000, rate=16000),
                 EntryMedium(2, "audio", "stereo.wav", samples=32000, rate=16000)]
        rendered = ours.render(clip_rows(folder)[1] | {"messages": clip_rows(folder)[1]["messages"][:4]}, media)
        assert theirs["input_ids"].tolist() == rendered.input_ids
        assert theirs["labels"].tolist() == rendered.labels
        assert theirs["feature_attention_mask"].sum(-1).tolist() == [300]  # the first clip kept


def test_a_clip_at_another_rate_is_a_render_error_saying_why(tmp_path: Path) -> None:
    write_clip(tmp_path / "slow.wav", 1.0, rate=8000)
    write_clip(tmp_path / "ok.wav", 1.0)
    write_jsonl(tmp_path / "a.jsonl", [
        {"messages": [message("user", ("audio_url", str(tmp_path / name))), message("assistant", ("text", "Hm."))]}
        for name in ("ok.wav", "slow.wav")])
    build(write_yaml(tmp_path / "c.yaml", f"a:\n  path: {tmp_path / 'a.jsonl'}\n  source: local\n"), tmp_path / "s.db")
    render_store(RenderRequest(tmp_path / "s.db", save_qwen2_audio_folder(tmp_path / "model"), cutoff=4096, jobs=1))
    found = run_query(tmp_path / "s.db", "SELECT row, status, cause, detail FROM entry_lengths ORDER BY row")[1]
    assert found[0][1:3] == ("ok", None)
    assert found[1][1:3] == ("render_error", "media")
    assert "slow.wav: sampled at 8000 Hz, and the processor takes 16000 Hz" in found[1][3]


def test_audio_batches_and_v1s_dummy_audio_fragment(clips: tuple[Path, Path, dict[str, Any]]) -> None:
    _, store, _ = clips
    with DataEngine(store, render="tokens") as engine:
        entries = engine[[0, 1]]
        fragment = engine.dummy_media_fragment()
    batch = Collator(pad_token_id=0, dummy_media=fragment)(entries)
    assert torch.equal(batch["input_features"], torch.cat([entry["input_features"] for entry in entries]))
    assert torch.equal(batch["feature_attention_mask"], torch.cat([e["feature_attention_mask"] for e in entries]))
    assert batch["position_ids"].dim() == 2  # Qwen2-Audio's positions are plain ones
    processor = qwen2_audio_processor()
    tokenizer = processor.tokenizer
    assert fragment["input_ids"][0] == tokenizer.convert_tokens_to_ids("<|audio_bos|>")
    assert fragment["input_ids"][-1] == tokenizer.convert_tokens_to_ids("<|audio_eos|>")
    assert fragment["mm_token_type_ids"] == [0, 3, 3, 0]  # a tenth of a second: 10 frames, 2 tokens
    text = Collator(pad_token_id=0, dummy_media=fragment)([{"input_ids": [5, 6], "labels": [IGNORE, 6],
                                                            "loss_weights": [0.0, 1.0]}])
    assert text["input_ids"][0].tolist() == [5, 6, *fragment["input_ids"]]
    assert torch.equal(text["input_features"], fragment["input_features"])
    renderer = v1_renderer()
    if renderer is not None:
        with torchaudio_for_its_import():
            theirs = renderer.get_dummy_media_fragment("audio")
        assert theirs["input_ids"] == fragment["input_ids"]
        assert theirs["mm_token_type_ids"] == fragment["mm_token_type_ids"]
        assert torch.equal(theirs["input_features"], fragment["input_features"])

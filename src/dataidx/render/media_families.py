"""What a processor family does with one kind of media: how many placeholder tokens an item
takes, counted from what the build read in its header, and its features, computed from the file.

Two families load here (:mod:`.processor_folder`):

- **Qwen2-VL's images** (``Qwen2VLProcessor``): ``grid_t * grid_h * grid_w // merge_size**2``
  copies of ``<|image_pad|>`` per image, the grid arithmetic on its size (:mod:`.media_tokens`);
  features ``pixel_values`` and ``image_grid_thw``; ``mm_token_type_ids`` 1.
- **Qwen2-Audio's audio** (``Qwen2AudioProcessor``, transformers 5.24
  models/qwen2_audio/processing_qwen2_audio.py): Whisper's feature extractor pads or cuts a
  waveform to 30 s and marks ``ceil(samples / hop_length)`` frames (at most 3,000) in its
  ``attention_mask``; the processor writes ``((frames - 1) // 2 + 1 - 2) // 2 + 1`` copies of
  ``<|AUDIO|>`` (``_process_audio``). So the count is arithmetic on a WAV header's sample count;
  features ``input_features`` and ``feature_attention_mask``; ``mm_token_type_ids`` 3, as v1
  marks audio tokens (``_attach_multimodal``). A waveform is read as v1 reads it
  (``_load_audios``: torchaudio's normalised float, channels averaged); torchaudio has no build
  for this torch on the registries, so WAV is decoded here with ``wave`` and numpy, and a rate
  other than the extractor's is refused rather than resampled differently from v1.
"""

from __future__ import annotations

import math
import wave
from dataclasses import dataclass
from typing import Any

from ..errors import RenderError, bounded
from ..store import Media
from .media_tokens import Qwen2VLImageConfig, qwen2_vl_grid

#: The features v1 passes through per sample (``_MULTIMODAL_PASSTHROUGH_KEYS``), by family.
IMAGE_FEATURES = ("pixel_values", "image_grid_thw")
AUDIO_FEATURES = ("input_features", "feature_attention_mask")


@dataclass(frozen=True)
class EntryMedium:
    """One media block of a row as the build recorded its file: the message holding it, its kind,
    what its header says, and its path (for errors and for fetching features)."""

    message: int
    kind: str
    path: str
    width: int | None = None
    height: int | None = None
    samples: int | None = None
    rate: int | None = None


def medium(file: Media.RowFile, path: str | None = None) -> EntryMedium:
    """A recorded file as the renderer takes it (at ``path`` where it is now, if given)."""
    return EntryMedium(file.message, file.kind, path or file.path, file.width, file.height, file.samples, file.rate)


@dataclass(frozen=True)
class MediaCount:
    """An item's placeholder tokens under a processor, and what they come from: an image's grid
    (``image_grid_thw``), or an audio's feature frames."""

    tokens: int
    grid: tuple[int, int, int] | None = None
    frames: int | None = None


class Qwen2VLImages:
    """Images under a Qwen2-VL-style processor."""

    kind, marker, features = "image", 1, IMAGE_FEATURES

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.config = Qwen2VLImageConfig.from_settings(processor.image_processor.to_dict())
        self.placeholder: str = processor.image_token
        self.token_id: int = processor.image_token_id

    def settings(self) -> dict[str, Any]:
        return processor_part(self.processor).to_dict()

    def count(self, medium: EntryMedium) -> MediaCount:
        if medium.width is None or medium.height is None:
            raise RenderError(f"{medium.path}: the store recorded no size for it", cause="media")
        try:
            grid = qwen2_vl_grid(medium.width, medium.height, self.config)
        except RenderError as exc:
            raise RenderError(f"{medium.path}: {exc}", cause="media") from None
        return MediaCount(grid.tokens, grid=(grid.t, grid.h, grid.w))

    def compute(self, paths: list[str]) -> dict[str, Any]:
        """Features of the images at ``paths``, in order (``return_tensors="pt"``)."""
        from PIL import Image  # only serving media decodes pixels: text readers never load Pillow

        images = []
        for path in paths:
            try:
                with Image.open(path) as image:
                    images.append(image.convert("RGB"))
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise MediaUnreadable(path, exc) from None
        return dict(self.processor.image_processor(images=images, return_tensors="pt"))

    def counted(self, made: dict[str, Any]) -> list[MediaCount]:
        """What the processor's features say of each item (to hold against the header's count)."""
        merge = self.config.merge_size ** 2
        return [MediaCount(t * h * w // merge, grid=(t, h, w)) for t, h, w in made["image_grid_thw"].tolist()]

    def dummy(self) -> Any:
        """v1's dummy image (``get_dummy_media_fragment``): 64x64, black."""
        from PIL import Image  # only serving media makes pixels: text readers never load Pillow

        return Image.new("RGB", (64, 64))


class Qwen2Audio:
    """Audio under a Qwen2-Audio-style processor (Whisper's feature extractor)."""

    kind, marker, features = "audio", 3, AUDIO_FEATURES

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        extractor = processor.feature_extractor
        self.rate: int = extractor.sampling_rate
        self.hop: int = extractor.hop_length
        self.most_frames: int = extractor.nb_max_frames
        self.placeholder: str = processor.audio_token
        self.token_id: int = processor.audio_token_id

    def settings(self) -> dict[str, Any]:
        return processor_part(self.processor).to_dict()

    def count(self, medium: EntryMedium) -> MediaCount:
        if medium.samples is None or medium.rate is None:
            raise RenderError(f"{medium.path}: the store recorded no samples or rate for it", cause="media")
        if medium.rate != self.rate:
            raise RenderError(f"{medium.path}: sampled at {medium.rate} Hz, and the processor takes {self.rate} Hz: "
                              "v1 resamples with torchaudio, which has no build for this torch here; resample the "
                              "file", cause="media")
        frames = min(math.ceil(medium.samples / self.hop), self.most_frames)
        tokens = audio_tokens(frames)
        if tokens < 1:
            raise RenderError(f"{medium.path}: {medium.samples} samples make no audio token", cause="media")
        return MediaCount(tokens, frames=frames)

    def compute(self, paths: list[str]) -> dict[str, Any]:
        """Features of the WAV files at ``paths``, as the processor makes them for v1."""
        waves = [read_wav(path) for path in paths]
        made = self.processor.feature_extractor(waves, sampling_rate=self.rate, return_attention_mask=True,
                                                padding="max_length", return_tensors="pt")
        return {"input_features": made["input_features"], "feature_attention_mask": made["attention_mask"]}

    def counted(self, made: dict[str, Any]) -> list[MediaCount]:
        frames = made["feature_attention_mask"].sum(-1).tolist()
        return [MediaCount(audio_tokens(int(n)), frames=int(n)) for n in frames]

    def dummy(self) -> Any:
        """v1's dummy audio: a tenth of a second of silence at the extractor's rate."""
        import numpy as np  # only serving audio makes samples: text readers never load NumPy here

        return np.zeros(self.rate // 10, dtype=np.float32)


MediaFamily = Qwen2VLImages | Qwen2Audio


def media_family(processor: Any) -> MediaFamily:
    """The family a loaded processor renders."""
    return Qwen2Audio(processor) if hasattr(processor, "feature_extractor") else Qwen2VLImages(processor)


def processor_part(processor: Any) -> Any:
    """The part of a processor whose settings its counts depend on."""
    return getattr(processor, "feature_extractor", None) or processor.image_processor


def audio_tokens(frames: int) -> int:
    """``Qwen2AudioProcessor``'s placeholder count for ``frames`` feature frames."""
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


class MediaUnreadable(RenderError):
    """A recorded media file that does not decode when its features are made (a reader says which
    dataset and row: :class:`~dataidx.errors.MediaError`)."""

    def __init__(self, path: str, exc: BaseException) -> None:
        self.path = path
        super().__init__(f"media file {path} cannot be decoded: {bounded(str(exc), 200)}", cause="media")


def read_wav(path: str) -> Any:
    """A WAV file's samples as v1 loads audio (torchaudio's ``load``: floats in [-1, 1), channels
    averaged to mono), decoded with ``wave`` and numpy (PCM of 8, 16, 24 or 32 bits)."""
    import numpy as np  # only serving audio decodes samples: text readers never load NumPy here

    try:
        with wave.open(path, "rb") as audio:
            width, channels, frames = audio.getsampwidth(), audio.getnchannels(), audio.getnframes()
            raw = audio.readframes(frames)
    except (OSError, EOFError, wave.Error) as exc:
        raise MediaUnreadable(path, exc) from None
    if width == 1:
        values = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width in (2, 4):
        kind = np.int16 if width == 2 else np.int32
        values = np.frombuffer(raw, dtype=f"<i{width}").astype(np.float32) / float(-np.iinfo(kind).min)
    elif width == 3:
        bytes_ = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        joined = bytes_[:, 0] | (bytes_[:, 1] << 8) | (bytes_[:, 2] << 16)
        values = (np.where(joined >= 1 << 23, joined - (1 << 24), joined)).astype(np.float32) / float(1 << 23)
    else:
        raise MediaUnreadable(path, ValueError(f"{8 * width}-bit samples"))
    return values.reshape(-1, channels).mean(axis=1) if channels > 1 else values

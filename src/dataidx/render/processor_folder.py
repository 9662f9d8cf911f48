"""A multimodal model folder's processor, loaded offline without torchvision: Qwen2-VL's for
images, Qwen2-Audio's for audio.

LLaMA-Factory v1 renders a multimodal entry with whatever ``AutoProcessor`` loads from the model
path. transformers 5.24's ``Qwen2VLProcessor`` cannot be built on a machine without torchvision:
its ``video_processor`` slot is checked against ``BaseVideoProcessor``, which needs torchvision,
and the registries here offer torchvision only as a CUDA build the CPU torch does not load. v1's
Renderer takes any processor object, so :func:`load_processor` builds the least that renders
images: ``Qwen2VLProcessor``'s own code (placeholder expansion, ``mm_token_type_ids``) in a
subclass with two slots, the image processor and the tokenizer, and the folder's chat template.

What loads, each file checked before transformers reads it (a regular file, within its bound):
the image processor from ``preprocessor_config.json`` (or the ``image_processor`` entry of a
``processor_config.json``, as ``save_pretrained`` writes it) as ``Qwen2VLImageProcessorPil``,
the PIL/numpy backend; the fast tokenizer (:func:`~.tokenizer_folder.load_tokenizer`); the chat
template from ``chat_template.jinja``, else ``chat_template.json``. A machine with torchvision
would get from ``AutoProcessor`` in addition the video processor (``Qwen2VLVideoProcessor``) and
the torchvision image backend; the grids and ids are the same arithmetic, pixel values may
differ in the last bits of the resampling. Videos are refused here, in one line.

A folder whose settings name a feature extractor is an audio model's: Whisper's feature extractor
(``WhisperFeatureExtractor``, numpy only) with the tokenizer and template make transformers' own
``Qwen2AudioProcessor`` (its default chat template when the folder has none, as it does itself).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import RenderError
from .media_tokens import Qwen2VLImageConfig
from .tokenizer_folder import MAX_SETTINGS_BYTES, load_tokenizer

#: ``image_processor_type`` values whose arithmetic is Qwen2-VL's ``smart_resize``
#: (Qwen2-VL and Qwen2.5-VL ship ``Qwen2VLImageProcessor``): the ones that load here yet.
QWEN2_VL_IMAGE_PROCESSORS = ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast", "Qwen2VLImageProcessorPil")
#: The family's placeholder tokens (transformers 5.24, models/qwen2_vl/processing_qwen2_vl.py,
#: ``Qwen2VLProcessor.__init__``'s defaults); the tokenizer must hold both.
IMAGE_TOKEN, VIDEO_TOKEN = "<|image_pad|>", "<|video_pad|>"
PREPROCESSOR_CONFIG, PROCESSOR_CONFIG = "preprocessor_config.json", "processor_config.json"
#: Qwen2-Audio's feature extractor and placeholder tokens (transformers 5.24,
#: models/qwen2_audio/processing_qwen2_audio.py, ``Qwen2AudioProcessor.__init__``'s defaults).
WHISPER_FEATURES = "WhisperFeatureExtractor"
AUDIO_TOKENS = ("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>")
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def holds_processor(path: str | os.PathLike[str]) -> bool:
    """Whether a tokenizer's folder is a multimodal model's: it holds an image processor's
    settings, as v1's ``AutoProcessor`` finds them."""
    location = Path(path)
    return location.is_dir() and any(os.path.lexists(location / name) for name in (PREPROCESSOR_CONFIG,
                                                                                   PROCESSOR_CONFIG))


def load_processor(path: str | os.PathLike[str]) -> Any:
    """The processor v1 would load from a local model folder with ``AutoProcessor``, as far as
    it loads without torchvision (module docstring), offline; one-line :class:`RenderError`
    naming the file for anything that cannot load."""
    location = Path(path)
    if not location.is_dir():
        raise RenderError(f"{location}: not a folder; give the local model folder that holds "
                          f"{PREPROCESSOR_CONFIG}, the tokenizer and the chat template")
    config, source = _settings_of_processor(location)
    if config.get("feature_extractor_type") is not None:
        return _audio_processor(location, config, source)
    kind = config.get("image_processor_type")
    if kind not in QWEN2_VL_IMAGE_PROCESSORS:
        raise RenderError(f"{source}: image_processor_type {kind!r}: only Qwen2-VL's image processor "
                          f"({QWEN2_VL_IMAGE_PROCESSORS[0]}) renders here yet")
    try:  # the settings its token counts depend on, checked before transformers takes them
        Qwen2VLImageConfig.from_settings(config)
    except RenderError as exc:
        raise RenderError(f"{source}: {exc}") from None
    pil = importlib.import_module("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    settings = {key: value for key, value in config.items() if key not in ("image_processor_type", "processor_class")}
    try:
        image_processor = pil.Qwen2VLImageProcessorPil(**settings)
    except Exception as exc:  # transformers raises many kinds for settings it cannot use
        raise RenderError(f"{source}: cannot build Qwen2-VL's image processor from it: {_first_line(exc)}") from None
    tokenizer = load_tokenizer(location)
    return images_only_processor(image_processor, tokenizer, _chat_template(location),
                                 where=f"{location}: the tokenizer")


def images_only_processor(image_processor: Any, tokenizer: Any, chat_template: str | None, *,
                          where: str = "the tokenizer") -> Any:
    """``Qwen2VLProcessor`` without its video slot, so it builds without torchvision: the
    placeholder tokens must be in ``tokenizer`` (``where`` names it in the refusal)."""
    _require_tokens(tokenizer, (IMAGE_TOKEN, VIDEO_TOKEN), where, "a Qwen2-VL-style tokenizer")
    return _processor_class()(image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template)


@functools.cache
def _processor_class() -> type:
    """The subclass, made on first use: transformers loads in seconds, and only rendering needs it.
    (Reached through importlib: the pyright stub of transformers names only what dataidx types.)"""
    processing = importlib.import_module("transformers.models.qwen2_vl.processing_qwen2_vl")
    mixin = importlib.import_module("transformers.processing_utils").ProcessorMixin

    class ImagesOnlyQwen2VLProcessor(processing.Qwen2VLProcessor):
        """Qwen2-VL's processor with two slots (image processor, tokenizer): ``get_attributes``
        reads them off this signature, so saving and checking skip the video processor."""

        def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None,
                     **kwargs: Any) -> None:
            # What Qwen2VLProcessor.__init__ sets before its super().__init__ (transformers 5.24).
            self.image_token, self.video_token = IMAGE_TOKEN, VIDEO_TOKEN
            self.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
            self.video_token_id = tokenizer.convert_tokens_to_ids(VIDEO_TOKEN)
            mixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)

        def __call__(self, *args: Any, videos: Any = None, **kwargs: Any) -> Any:
            if videos is not None:
                raise RenderError("videos need Qwen2-VL's video processor, which needs torchvision; this "
                                  "processor (loaded without it) renders images only")
            return super().__call__(*args, **kwargs)

    return ImagesOnlyQwen2VLProcessor


def _audio_processor(location: Path, config: dict[str, Any], source: Path) -> Any:
    """Qwen2-Audio's processor (Whisper's feature extractor, the tokenizer, the chat template,
    else the processor's own default, as ``Qwen2AudioProcessor`` takes none): numpy only."""
    kind = config.get("feature_extractor_type")
    if kind != WHISPER_FEATURES:
        raise RenderError(f"{source}: feature_extractor_type {kind!r}: only Whisper's feature extractor "
                          f"({WHISPER_FEATURES}, Qwen2-Audio's) renders audio here")
    for name in ("sampling_rate", "hop_length", "n_samples", "chunk_length"):  # what the counts depend on
        value = config.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise RenderError(f"{source}: feature extractor {name} {value!r}: not a positive integer")
    settings = {key: value for key, value in config.items() if key not in ("feature_extractor_type", "processor_class")}
    whisper = importlib.import_module("transformers.models.whisper.feature_extraction_whisper")
    try:
        extractor = whisper.WhisperFeatureExtractor(**settings)
    except Exception as exc:  # transformers raises many kinds for settings it cannot use
        raise RenderError(f"{source}: cannot build Whisper's feature extractor from it: {_first_line(exc)}") from None
    tokenizer = load_tokenizer(location)
    _require_tokens(tokenizer, AUDIO_TOKENS, f"{location}: the tokenizer", "a Qwen2-Audio-style tokenizer")
    processing = importlib.import_module("transformers.models.qwen2_audio.processing_qwen2_audio")
    return processing.Qwen2AudioProcessor(feature_extractor=extractor, tokenizer=tokenizer,
                                          chat_template=_chat_template(location))


def _require_tokens(tokenizer: Any, tokens: tuple[str, ...], where: str, what: str) -> None:
    vocabulary = tokenizer.get_vocab()
    missing = [token for token in tokens if token not in vocabulary]
    if missing:
        raise RenderError(f"{where} has no {' and no '.join(missing)} token: not {what}")


def _settings_of_processor(location: Path) -> tuple[dict[str, Any], Path]:
    """The image processor's (or feature extractor's) settings and the file they are in."""
    path = location / PREPROCESSOR_CONFIG
    if os.path.lexists(path):
        config = _settings(path)
    elif os.path.lexists(location / PROCESSOR_CONFIG):
        path = location / PROCESSOR_CONFIG
        found = _settings(path)
        config = found.get("image_processor") or found.get("feature_extractor")
        if not isinstance(config, dict):
            raise RenderError(f"{path}: no image_processor or feature_extractor object in it (nor a "
                              f"{PREPROCESSOR_CONFIG} beside it)")
    else:
        raise RenderError(f"{location}: no {PREPROCESSOR_CONFIG} (nor {PROCESSOR_CONFIG}): the folder holds no "
                          "image processor; give a multimodal model's folder")
    return config, path


def _chat_template(location: Path) -> str | None:
    """The processor's chat template, where ``AutoProcessor`` reads it: ``chat_template.jinja``,
    else the ``chat_template`` of ``chat_template.json``; None without either (v1 then uses ChatML)."""
    jinja, legacy = (location / name for name in TEMPLATE_FILES)
    if os.path.lexists(jinja):
        _check_file(jinja)
        try:
            return jinja.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RenderError(f"{jinja}: cannot be read ({_first_line(exc)})") from None
    if os.path.lexists(legacy):
        template = _settings(legacy).get("chat_template")
        if not isinstance(template, str):
            raise RenderError(f"{legacy}: its chat_template is not a string")
        return template
    return None


def _settings(path: Path) -> dict[str, Any]:
    """A JSON object from a settings file, checked small and regular first."""
    _check_file(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RenderError(f"{path}: not JSON ({_first_line(exc)})") from None
    if not isinstance(value, dict):
        raise RenderError(f"{path}: not a JSON object")
    return value


def _check_file(path: Path) -> None:
    """A regular file of at most :data:`MAX_SETTINGS_BYTES` (a FIFO or ``/dev/zero`` would hang)."""
    if not path.is_file():
        raise RenderError(f"{path}: not a regular file; a processor's settings must be regular files")
    size = path.stat().st_size
    if size > MAX_SETTINGS_BYTES:
        raise RenderError(f"{path}: {size:,} bytes, more than the {MAX_SETTINGS_BYTES:,} a processor's settings "
                          "file may have here")


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split("\n")[0].split()).rstrip(":, ") or type(exc).__name__

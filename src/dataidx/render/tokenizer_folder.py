"""A tokenizer from a local folder, its files checked before transformers reads them.

transformers opens what a folder holds without asking what it is: a ``tokenizer_config.json``
linked to ``/dev/zero`` is read until memory runs out, a FIFO blocks for ever, a 1 GB file is
parsed whole, and each added token costs time as it loads (10^6 of them took more than 400 s).
So every file it may read for a tokenizer is checked first: a regular file (a link to a device,
a FIFO or a folder is named as such), of at most :data:`MAX_VOCABULARY_BYTES` (a vocabulary) or
:data:`MAX_SETTINGS_BYTES` (settings, templates); and the added tokens are counted against
:data:`MAX_ADDED_TOKENS`. Each check is one line naming the file and what is wrong, as is a
malformed chat template list (transformers says only the key it missed: ``'name'``).

A folder whose ``tokenizer_config.json`` names a tokenizer class through ``auto_map`` (a
``tokenization_*.py`` of its own, slow or fast) is loaded only with ``trust_remote_code``:
loading runs that code. Without it the folder is refused in one line naming the flag.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import RenderError

#: The vocabulary files a tokenizer is read or converted from: tens of MB in real ones
#: (Gemma 3's tokenizer.json, one of the largest, is 33 MB).
VOCABULARIES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json", "vocab.txt", "merges.txt",
                "spiece.model", "sentencepiece.bpe.model")
#: The settings transformers reads beside them (and a model's config.json, for its type):
#: kilobytes in real tokenizers, a long chat template tens of KB.
SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "config.json",
            "chat_template.jinja", "chat_template.json")
#: The folder of a tokenizer's further chat templates, ``NAME.jinja`` each (settings too).
TEMPLATES = "additional_chat_templates"
MAX_VOCABULARY_BYTES = 128 << 20
MAX_SETTINGS_BYTES = 16 << 20
#: Added tokens a tokenizer may have: loading and escaping them takes about 30 us each (2 s at
#: this bound); real tokenizers have a few thousand.
MAX_ADDED_TOKENS = 1 << 16
#: Files one of which a tokenizer folder holds (fast, slow and tiktoken vocabularies).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "tiktoken.model")
#: ``tokenizer_class`` values for which AutoTokenizer builds the generic fast tokenizer itself.
_GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(path: str | os.PathLike[str], *, trust_remote_code: bool = False) -> Any:
    """A tokenizer from a local model folder (or its ``tokenizer.json``), offline, its files
    checked first (:func:`checked_folder`); one of the folder's own code only with
    ``trust_remote_code`` (:func:`check_remote_code`)."""
    import transformers  # here, not at import: seconds to load, and only rendering needs it

    location = Path(path)
    if not location.exists():
        raise RenderError(f"{location}: tokenizer not found (a model folder or its tokenizer.json)")
    if location.is_file():
        if location.name != "tokenizer.json":
            raise RenderError(f"{location}: not a tokenizer; give a local model folder (with tokenizer.json and "
                              "tokenizer_config.json) or its tokenizer.json")
        # A bare tokenizer.json knows no BOS/EOS: renders would silently lack them.
        if not (location.parent / "tokenizer_config.json").exists():
            raise RenderError(f"{location}: a tokenizer.json alone names no special tokens (BOS, EOS); give the "
                              "folder that holds it with its tokenizer_config.json")
        location = location.parent
    elif not location.is_dir():
        raise RenderError(f"{location}: {_kind(location)}, not a tokenizer folder; give a local model folder")
    elif not any(os.path.lexists(location / name) for name in _TOKENIZER_FILES):
        raise RenderError(f"{location}: not a tokenizer folder: it holds none of {', '.join(_TOKENIZER_FILES)}; "
                          "give a local model folder")
    config = checked_folder(location)
    remote = check_remote_code(location, trust_remote_code, config)
    try:
        generic = _generic_fast_class(location, config, transformers)
        if generic is not None:
            return generic.from_pretrained(str(location), local_files_only=True)
        if remote:
            return transformers.AutoTokenizer.from_pretrained(str(location), trust_remote_code=True,
                                                              local_files_only=True)
        return transformers.AutoTokenizer.from_pretrained(str(location), local_files_only=True)
    except Exception as exc:  # transformers raises many kinds for unreadable folders
        if remote:
            raise RenderError(f"{location}: cannot load the tokenizer class of its own code: {_first_line(exc)}"
                              ) from None
        if not (location / "tokenizer.json").is_file() and not _slow_files(location):
            raise RenderError(f"{location}: cannot load a fast tokenizer: the folder has no tokenizer.json (save "
                              "one there with AutoTokenizer.from_pretrained(...).save_pretrained)") from None
        raise RenderError(f"{location}: cannot load a tokenizer from it: {_first_line(exc)}") from None


def check_remote_code(location: Path, trust_remote_code: bool, config: dict[str, Any] | None = None) -> bool:
    """Whether the tokenizer at ``location`` (a folder or its ``tokenizer.json``) is a class of
    its folder's own code (``auto_map`` for AutoTokenizer in ``tokenizer_config.json``); a
    RenderError in one line when it is and ``trust_remote_code`` is off."""
    folder = location.parent if location.is_file() else location
    if config is None:
        config = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else None
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    remote = isinstance(auto_map, list | tuple) or (isinstance(auto_map, dict) and "AutoTokenizer" in auto_map)
    if remote and not trust_remote_code:
        raise RenderError(f"{folder}: its tokenizer is a class from the folder's own code (auto_map in "
                          "tokenizer_config.json), and loading it would run code from the model folder; give "
                          "--trust-remote-code (trust_remote_code=True) if you trust it")
    return remote


def _slow_files(location: Path) -> bool:
    """Whether the folder holds a vocabulary a slow tokenizer class reads (its config naming the class)."""
    return any((location / name).is_file() for name in VOCABULARIES if name != "tokenizer.json")


def checked_folder(location: Path) -> dict[str, Any]:
    """Refuse, in one line, a tokenizer folder whose files transformers should not read: each
    one it may read must be a regular file within its bound, the added tokens within theirs, a
    chat template list well formed. Returns its ``tokenizer_config.json`` ({} without one)."""
    bounds = {name: MAX_VOCABULARY_BYTES for name in VOCABULARIES} | {name: MAX_SETTINGS_BYTES for name in SETTINGS}
    if (location / TEMPLATES).is_dir():
        bounds |= {f"{TEMPLATES}/{path.name}": MAX_SETTINGS_BYTES for path in (location / TEMPLATES).glob("*.jinja")}
    for name, limit in bounds.items():
        _check_file(location / name, limit)
    config = _json(location / "tokenizer_config.json") or {}
    if not isinstance(config, dict):
        raise RenderError(f"{location / 'tokenizer_config.json'}: not a JSON object")
    versions = config.get("fast_tokenizer_files")  # other tokenizer.json files it names, by version
    for name in versions if isinstance(versions, list) else ():
        if isinstance(name, str):
            _check_file(location / name, MAX_VOCABULARY_BYTES)
    _check_templates(config.get("chat_template"), location / "tokenizer_config.json")
    _check_added(location, config)
    return config


def _check_file(path: Path, limit: int) -> None:
    """A file a tokenizer is read from: absent, or a regular file of at most ``limit`` bytes."""
    if not os.path.lexists(path):
        return  # transformers does without it
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError as exc:
        raise RenderError(f"{path}: cannot be read ({exc.strerror})") from None
    if size is None:
        raise RenderError(f"{path}: {_kind(path)}, not a file; a tokenizer's files must be regular files")
    if size > limit:
        raise RenderError(f"{path}: {size:,} bytes, more than the {limit:,} a tokenizer's "
                          f"{'vocabulary' if limit == MAX_VOCABULARY_BYTES else 'settings'} file may have here")


def _kind(path: Path) -> str:
    """What ``path`` is, where it is not a regular file: a link says where it leads."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return f"a link to {os.readlink(path)}, which does not exist" if os.path.islink(path) else "not there"
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file"))
    what = next((kind for test, kind in kinds if test(mode)), "not a regular file")
    return f"a link to {os.path.realpath(path)}, {what}" if os.path.islink(path) else what


def _json(path: Path) -> Any:
    """A settings file's JSON (checked small), or None where there is none."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RenderError(f"{path}: not JSON ({_first_line(exc)})") from None


def _check_templates(templates: Any, path: Path) -> None:
    """A chat template list, as transformers stores several: ``{"name": ..., "template": ...}`` each."""
    if not isinstance(templates, list):
        return
    for number, entry in enumerate(templates):
        missing = [key for key in ("name", "template") if not isinstance(entry, dict) or key not in entry]
        if missing:
            raise RenderError(f"{path}: chat_template entry {number} (of {len(templates)}) has no "
                              + " and no ".join(repr(key) for key in missing)
                              + "; each entry is {\"name\": ..., \"template\": ...}")


def _check_added(location: Path, config: dict[str, Any]) -> None:
    """Refuse more added tokens than :data:`MAX_ADDED_TOKENS`, counted before transformers loads them."""
    counts = {"tokenizer_config.json": len(config.get("added_tokens_decoder") or ())}
    added = _json(location / "added_tokens.json")
    counts["added_tokens.json"] = len(added) if isinstance(added, dict) else 0
    if (location / "tokenizer.json").exists():
        from tokenizers import Tokenizer  # here, not at import: a Rust library only rendering needs

        try:  # the Rust parse: a tenth of a second for a real tokenizer.json, loading nothing into Python
            counts["tokenizer.json"] = len(Tokenizer.from_file(str(location / "tokenizer.json"))
                                           .get_added_tokens_decoder())
        except Exception:  # not one the Rust library reads: transformers says why when it loads it
            pass
    for name, count in counts.items():
        if count > MAX_ADDED_TOKENS:
            raise RenderError(f"{location / name}: {count:,} added tokens, more than the {MAX_ADDED_TOKENS:,} a "
                              "tokenizer may have here (each costs time to load and escape; real tokenizers have a "
                              "few thousand)")


def _generic_fast_class(location: Path, config: dict[str, Any], transformers: Any) -> Any:
    """The class AutoTokenizer would pick, where it is the generic fast tokenizer: a folder with a
    ``tokenizer.json``, a config naming a generic class, no remote code and no model
    ``config.json`` (whose model type could pick another class). AutoTokenizer itself reads a
    model config through transformers' configuration module, which imports torch: 3 s of every
    fresh ``dataidx render`` or report. None where AutoTokenizer must decide."""
    backend = getattr(transformers, "TokenizersBackend", None)  # transformers 5
    if backend is None or (location / "config.json").exists() or not (location / "tokenizer.json").is_file():
        return None
    if "auto_map" in config or config.get("tokenizer_class") not in _GENERIC_CLASSES:
        return None
    return backend


def _first_line(exc: Exception) -> str:
    """What a loading error says, without transformers' multi-line advice."""
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    return text.rstrip(":, ")

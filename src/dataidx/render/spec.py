"""Render specs: which tokenizer, template, cutoff and truncation, and their fingerprint.

Lengths in a store are only as good as the rendering they came from. The fingerprint hashes the
tokenizer's full serialised state (vocabulary, merges, normalisation, special tokens), the
template text, the cutoff, the truncation policy, the dataidx version and the label rule, so any
change gives a new fingerprint: ``dataidx render`` recomputes, and readers refuse lengths that no
longer match, or that an older label rule computed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import RenderError, StaleStoreError
from ..store import Specs, StoreHandle
from .chat_text import reads_clock
from .media_families import processor_part
from .processor_folder import load_processor
from .renderer import Renderer
from .slow import refuse_other, slow_fingerprint
from .templates import choose_template
from .tokenizer_folder import check_remote_code, load_tokenizer

#: The label rule in force, part of every fingerprint: a spec stored under another rule (before
#: LLaMA-Factory v1's labels, or before its chat inputs: ``"[]"`` tools as ``[]``, reasoning also
#: as ``thinking``, no prompt-less turn) is refused by readers until it is rendered again.
LABEL_RULE = "llamafactory-v1/chat-inputs"


def spec_fingerprint(tokenizer_sha256: str, template_text: str, cutoff: int, truncation: str, version: str,
                     clock: str | None = None, escapes: str = "special", trust_remote_code: bool = False,
                     processor: str | None = None) -> str:
    """What identifies a spec's lengths. The clock (only templates that read it have one), a
    non-default escape, trusted remote code and a processor's settings are hashed only when set,
    so every spec made before them keeps its fingerprint."""
    fields: list[object] = [tokenizer_sha256, template_text, cutoff, truncation, version, LABEL_RULE]
    if clock is not None:
        fields.append({"clock": clock})
    if escapes != "special":
        fields.append({"escapes": escapes})
    if trust_remote_code:
        fields.append({"trust_remote_code": True})
    if processor is not None:
        fields.append({"processor": processor})
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of everything about a tokenizer that can change rendered ids (a slow one's state:
    :func:`.slow.slow_fingerprint`; a fast one's as before, so stored specs keep theirs)."""
    refuse_other(tokenizer)
    if not getattr(tokenizer, "is_fast", False):
        return hashlib.sha256(json.dumps(slow_fingerprint(tokenizer), sort_keys=True).encode()).hexdigest()
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    backend["truncation"] = backend["padding"] = None  # runtime settings; rendering turns them off
    state = {
        "backend": backend,
        "special": tokenizer.special_tokens_map,
        "class": type(tokenizer).__name__,
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class RenderSpec:
    """A named way to render a store's entries; ``fingerprint`` identifies it exactly."""

    name: str
    tokenizer_path: str
    tokenizer_sha256: str
    template: str
    template_text: str
    cutoff: int
    truncation: str
    version: str
    clock: str | None = None
    escapes: str = "special"
    #: its tokenizer's class is code from its folder (``--trust-remote-code``): readers must trust it too
    trust_remote_code: bool = False
    #: the image processor's settings (JSON) entries with media render with; None: a text spec
    processor: str | None = None
    #: what proved header counts equal to the processor's (:func:`.media_render.prove_header_counts`)
    media_proof: str | None = None

    @property
    def fingerprint(self) -> str:
        return spec_fingerprint(self.tokenizer_sha256, self.template_text, self.cutoff, self.truncation, self.version,
                                self.clock, self.escapes, self.trust_remote_code, self.processor)


def make_spec(name: str, tokenizer: Any, *, tokenizer_path: str | os.PathLike[str], template: str | None, cutoff: int,
              truncation: str, clock: str | None = None, escapes: str = "special",
              trust_remote_code: bool = False, processor: Any = None) -> tuple[RenderSpec, Renderer]:
    """A spec and its renderer; checks everything before any entry is rendered.

    ``clock`` is the time a template that reads it (``strftime_now``) renders at: the spec's
    recorded one when it is rendered again, or one the user chose; now when None. Templates that
    do not read the clock have none, so their fingerprint does not change with the day.
    ``trust_remote_code`` records that the tokenizer at ``tokenizer_path`` is loaded with its
    folder's code; a folder that needs it is refused without it, even for a tokenizer already loaded.
    ``processor`` (a model folder's, :func:`.processor_folder.load_processor`) renders the entries
    that hold media; its settings are recorded and fingerprinted.
    """
    trusted = check_remote_code(Path(tokenizer_path), trust_remote_code)  # recorded only where code runs
    processor_template = processor is not None and template is None and bool(processor.chat_template)
    template_name, text = choose_template(processor if processor_template else tokenizer, template)
    if processor_template:  # v1 renders with the processor's template when it has one
        template_name = "processor"
    renderer = Renderer(tokenizer, text, cutoff, truncation, clock=clock, escapes=escapes)
    spec = RenderSpec(name=name, tokenizer_path=str(Path(tokenizer_path).resolve()),
                      tokenizer_sha256=tokenizer_fingerprint(tokenizer), template=template_name, template_text=text,
                      cutoff=cutoff, truncation=truncation, version=__version__, clock=renderer.chat.clock,
                      escapes=escapes, trust_remote_code=trusted,
                      processor=processor_settings(processor) if processor is not None else None)
    return spec, renderer


def processor_settings(processor: Any) -> str:
    """What a spec records of a processor: its image processor's settings, as sorted JSON."""
    return json.dumps(processor_part(processor).to_dict(), sort_keys=True, default=str)


@dataclass(frozen=True, kw_only=True)
class StoredSpec:
    """A spec as a store recorded it."""

    id: int
    name: str
    fingerprint: str
    tokenizer_path: str
    tokenizer_sha256: str
    template_text: str
    cutoff: int
    truncation: str
    entries: int
    #: entries that train under the spec (the column ``render_specs.kept``)
    training_entries: int
    version: str
    clock: str | None = None
    escapes: str = "special"
    trust_remote_code: bool = False
    processor: str | None = None
    media_proof: str | None = None

    def check(self) -> None:
        """Refuse a spec an older dataidx stored under other labels, or without its clock."""
        if self.clock is None and reads_clock(self.template_text):
            raise StaleStoreError(
                f"render spec '{self.name}': its template reads the clock (strftime_now), and the store does not "
                "record the time its lengths were rendered at (it was rendered before dataidx fixed it); run dataidx "
                "render again"
            )
        recorded = spec_fingerprint(self.tokenizer_sha256, self.template_text, self.cutoff, self.truncation,
                                    self.version, self.clock, self.escapes, self.trust_remote_code, self.processor)
        if recorded != self.fingerprint:
            raise StaleStoreError(
                f"render spec '{self.name}' was made by dataidx {self.version}, whose labels differ from LLaMA-Factory "
                "v1's; run dataidx render again"
            )

    def check_tokenizer(self, tokenizer: Any) -> None:
        """Refuse a tokenizer other than the one the spec's lengths were computed with."""
        if tokenizer_fingerprint(tokenizer) != self.tokenizer_sha256:
            raise StaleStoreError(
                f"render spec '{self.name}': the tokenizer at {self.tokenizer_path} changed since its lengths were "
                f"computed; run dataidx render again"
            )

    def render_command(self, store: object, tokenizer: object) -> str:
        """The ``dataidx render`` that renders this spec again as it is (its template aside)."""
        return (f"dataidx render {store} --tokenizer {tokenizer} --cutoff {self.cutoff} --truncation {self.truncation} "
                f"--name {self.name}" + (" --trust-remote-code" if self.trust_remote_code else ""))

    def recorded_tokenizer(self, *, trust_remote_code: bool = False) -> Any:
        """The tokenizer from where the spec recorded it; gone from there (a project folder
        moved), a RenderError saying how to record where it is now. A spec that records
        ``trust_remote_code`` runs its folder's code only when the caller trusts it too (a store
        alone never decides to run code)."""
        if self.trust_remote_code and not trust_remote_code:
            raise RenderError(f"render spec '{self.name}': its tokenizer at {self.tokenizer_path} is a class from "
                              "its folder's code (rendered with --trust-remote-code); loading it would run that code: "
                              "give --trust-remote-code (trust_remote_code=True) if you trust it")
        if not os.path.exists(self.tokenizer_path):
            raise RenderError(f"render spec '{self.name}': its tokenizer is not at {self.tokenizer_path} any more; if "
                              f"it moved, {self.render_command('STORE', 'NEW_PATH')} (and the --template it was "
                              "rendered with) records where it is, rendering nothing again")
        return load_tokenizer(self.tokenizer_path, trust_remote_code=trust_remote_code)

    def renderer(self, tokenizer: Any | None = None, *, trust_remote_code: bool = False) -> Renderer:
        """A renderer for this spec; the tokenizer (loaded from the recorded path unless given,
        running its folder's code only with ``trust_remote_code``) must be the one the lengths
        were computed with."""
        self.check()
        tokenizer = (tokenizer if tokenizer is not None
                     else self.recorded_tokenizer(trust_remote_code=trust_remote_code))
        self.check_tokenizer(tokenizer)
        return Renderer(tokenizer, self.template_text, self.cutoff, self.truncation, clock=self.clock,
                        escapes=self.escapes)


def recorded_processor(spec: StoredSpec, tokenizer: Any) -> Any:
    """The processor of a spec that renders media, loaded from its model folder and checked to
    be the one it recorded (its settings, and its tokenizer the spec's); None for a text spec."""
    if spec.processor is None:
        return None
    processor = load_processor(spec.tokenizer_path)
    if processor_settings(processor) != spec.processor:
        raise StaleStoreError(f"render spec '{spec.name}': the image processor at {spec.tokenizer_path} changed since "
                              "its lengths were computed; run dataidx render again")
    if tokenizer is not None:
        processor.tokenizer = tokenizer
    spec.check_tokenizer(processor.tokenizer)
    return processor


def read_spec(handle: StoreHandle, name: str) -> StoredSpec:
    """The stored spec ``name``, or a NotFoundError listing the specs there are."""
    row = Specs(handle).get(name)
    return StoredSpec(id=row["id"], name=row["name"], fingerprint=row["fingerprint"], tokenizer_path=row["tokenizer"],
                      tokenizer_sha256=row["tokenizer_sha256"], template_text=row["template_text"],
                      cutoff=row["cutoff"], truncation=row["truncation"], entries=row["entries"],
                      training_entries=row["kept"], version=row["dataidx_version"], clock=row["clock"],
                      escapes=row["escapes"], trust_remote_code=bool(row["trust_remote_code"]),
                      processor=row["processor"], media_proof=row["media_proof"])

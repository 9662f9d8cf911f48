"""Optional fast engines, each proven on the spec's own data before it is used.

The default engines are exact by construction: Hugging Face's Jinja environment (in dataidx's
sandbox) writes the chat text, the model's ``tokenizers`` backend tokenizes it. Two engines in
Rust can do the same work several times faster:

- ``minijinja`` renders the template. Where it fails (an error, its fuel, a filter it lacks),
  jinja2 renders that text, so errors and budgets read as they always do.
- ``gigatoken`` tokenizes. It has no character offsets: the rare entry whose labels are found by
  characters is tokenized by the model's tokenizer too.

Neither is trusted on faith: :func:`proven` renders a seeded sample of the store's entries with
both the fast and the exact engines and keeps a fast engine only where every text (``minijinja``)
and every id (``gigatoken``) is the same, saying why otherwise. The spec records the engines in
force and its fingerprint covers them, so ``dataidx verify --tokens`` (exact engines) can check
every stored entry afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import RenderError

TEMPLATE_ENGINES = ("jinja2", "minijinja")
TOKENIZER_ENGINES = ("hf", "gigatoken")
#: Base entries a spec asking for a fast engine renders both ways before it uses one.
PROOF_ENTRIES = 1000
PROOF_SEED = 0
_INSTALL = "pip install 'dataidx[fast]'"


@dataclass(frozen=True)
class Engines:
    """Which engine writes the chat text and which tokenizes it."""

    template: str = "jinja2"
    tokenizer: str = "hf"

    def __post_init__(self) -> None:
        if self.template not in TEMPLATE_ENGINES:
            raise RenderError(f"unknown template engine '{self.template}' (one of {', '.join(TEMPLATE_ENGINES)})")
        if self.tokenizer not in TOKENIZER_ENGINES:
            raise RenderError(f"unknown tokenizer engine '{self.tokenizer}' (one of {', '.join(TOKENIZER_ENGINES)})")

    @property
    def exact(self) -> bool:
        """Whether both are the default engines."""
        return self == Engines()


EXACT = Engines()


def private_backend(tokenizer: Any) -> Any:
    """A copy of the tokenizer's Rust backend with truncation and padding off."""
    from tokenizers import Tokenizer  # here, not at import: a Rust library only rendering needs

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend


class FastIds:
    """gigatoken over the renderer's tokenizer: ids only, in batches."""

    def __init__(self, backend: Any) -> None:
        try:
            import gigatoken  # here: an optional engine
        except ImportError:
            raise RenderError(f"the gigatoken tokenizer engine is not installed ({_INSTALL})") from None
        try:
            self.tokenizer = gigatoken.Tokenizer(backend)
        except Exception as exc:  # gigatoken refuses what it cannot run (a BPE without single-byte tokens)
            raise RenderError(f"gigatoken cannot run this tokenizer: {type(exc).__name__}: {exc}") from None

    def ids(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer.encode_batch_list(texts) if texts else []


@dataclass(frozen=True)
class Proof:
    """The engines a spec renders with, and why any asked for is not among them."""

    engines: Engines
    entries: int
    notes: tuple[str, ...] = ()


def proof_sample(entry_ids: Sequence[int]) -> list[int]:
    """The base entries a fast engine is proven on: a seeded sample, the same on every run."""
    return sorted(random.Random(PROOF_SEED).sample(list(entry_ids), min(PROOF_ENTRIES, len(entry_ids))))


def proven(asked: Engines, renderer_of: Callable[[Engines], Any], samples: list[tuple[Any, bool]]) -> Proof:
    """The engines of ``asked`` that give the exact engines' output on ``samples`` (``(sample,
    has_cut)`` of :func:`proof_sample`'s entries): the template engine compared on every text
    (and every refusal), the tokenizer engine on the ids of the exact texts. ``renderer_of(engines)``
    builds a renderer; a RenderError from it means the engine cannot run here."""
    if asked.exact:
        return Proof(EXACT, 0)
    notes: list[str] = []
    template, tokenizer = asked.template, asked.tokenizer
    exact_texts = _texts(renderer_of(EXACT), samples)
    if template != EXACT.template:
        try:
            fast_texts: list[str | None] | None = _texts(renderer_of(Engines(template=template)), samples)
            why = ""
        except RenderError as exc:
            fast_texts, why = None, str(exc)
        if fast_texts != exact_texts:
            if fast_texts is not None:
                first = next(k for k, (a, b) in enumerate(zip(fast_texts, exact_texts)) if a != b)
                why = f"its text differs from jinja2's (text {first} of the {len(samples)} entries checked)"
            notes.append(f"{template}: {why}; jinja2 renders this spec")
            template = EXACT.template
    if tokenizer != EXACT.tokenizer:
        texts = [text for text in exact_texts if text is not None]
        try:
            renderer = renderer_of(Engines(tokenizer=tokenizer))
            exact_ids = [encoding.ids for encoding in renderer.backend.encode_batch(texts, add_special_tokens=False)]
            same, why = renderer.fast_ids.ids(texts) == exact_ids, "its ids differ from the model tokenizer's"
        except RenderError as exc:
            same, why = False, str(exc)
        if not same:
            notes.append(f"{tokenizer}: {why}; the model's tokenizer tokenizes this spec")
            tokenizer = EXACT.tokenizer
    return Proof(Engines(template, tokenizer), len(samples), tuple(notes))


def _texts(renderer: Any, samples: list[tuple[Any, bool]]) -> list[str | None]:
    """Every text the renderer writes for the samples, and None in place of each refused entry's
    texts (its status and detail follow it, so refusals are compared too)."""
    found: list[str | None] = []
    for sample, has_cut in samples:
        draft = renderer.draft(sample, has_cut)
        if isinstance(draft, dict):
            found += [text for side in draft.values() for text in side.texts]
        else:
            found += [None, f"{draft.status}: {draft.detail}"]
    return found

"""One tokenizer pass per shared prefix (``render/shared_prefix.py``) gives exactly the ids of
tokenizing every text whole: property tests over texts made to break it (added tokens and their
fragments next to spaces, newlines, digits and other scripts, texts that part inside a token or
an added token), on byte-level BPE and on three sentencepiece-style set-ups; then the renderer
with derivation against the renderer tokenizing twice, entry by entry, on real families'
templates."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer

from dataidx.render import Renderer
from dataidx.render.shared_prefix import SharedPrefixes, common_prefix

from .conformance import BASE, family

#: Added tokens of two real families (Qwen3's byte-level, Gemma 3's sentencepiece-style), and the
#: turn markers their templates write.
FAMILY_OF_KIND = {"byte_level": "qwen3", "metaspace": "gemma3"}
TURN_MARKERS = {"byte_level": ("<|im_start|>", "<|im_end|>"), "metaspace": ("<start_of_turn>", "<end_of_turn>")}
#: The set-ups built on each base vocabulary (see backend_of).
BASE_OF = {"legacy": "metaspace", "prefix_space": "byte_level", "overlapping": "byte_level"}
#: Added tokens that hold another inside (``x<|im_end|>y``) or extend one (``<|im_start|>!``).
OVERLAPPING = ["x<|im_end|>y", "<|im_start|>!", "end|>\n"]


def backend_of(kind: str) -> Tokenizer:
    """A base vocabulary with a family's added tokens; ``legacy`` is Llama 2's set-up (a normalizer
    that prepends U+2581 to every piece and replaces spaces, no pre-tokenizer), ``prefix_space``
    byte-level BPE that adds a space before each piece, ``overlapping`` Qwen3's with
    :data:`OVERLAPPING` added."""
    base = BASE_OF.get(kind, kind)
    model = json.loads((BASE / f"{base}.json").read_text(encoding="utf-8"))
    if kind == "legacy":
        model["pre_tokenizer"] = None
        model["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    if kind == "prefix_space":
        model["pre_tokenizer"]["add_prefix_space"] = True
    backend = Tokenizer.from_str(json.dumps(model))
    spec = family(FAMILY_OF_KIND[base])["tokenizer"]
    backend.add_tokens([AddedToken(token["content"], special=token["special"], normalized=False)
                        for token in spec["added_tokens"]])
    if kind == "overlapping":  # added tokens inside or extending others: no anchor may be taken from these
        backend.add_tokens([AddedToken(content, normalized=False) for content in OVERLAPPING])
    return backend


KINDS = ("byte_level", "metaspace", "legacy", "prefix_space", "overlapping")
BACKENDS = {kind: backend_of(kind) for kind in KINDS}
ADDED = sorted({token.content for backend in BACKENDS.values()
                for token in backend.get_added_tokens_decoder().values()})
PIECES = st.one_of(
    st.sampled_from(ADDED),
    st.sampled_from([token[:cut] for token in ADDED for cut in (1, 2, len(token) - 1)] + ["|>", ">", "<", "▁"]),
    st.sampled_from([" ", "  ", "\n", "\n\n", "\t", " \n", "user", "assistant", "Hello", " world", "12345", "é",
                     "中文", "🙂", "<think>\n\n</think>\n\n", "'s", "...", "\u2581x"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
)
TEXTS = st.lists(PIECES, max_size=24).map("".join)


def whole(backend: Tokenizer, text: str) -> list[int]:
    return backend.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference=TEXTS, parts=st.lists(st.tuples(st.integers(0, 10**6), TEXTS), min_size=1, max_size=4))
def test_derived_ids_equal_whole_ids(kind: str, reference: str, parts: list[tuple[int, str]]) -> None:
    """Texts that share any prefix of a reference (none, part of an added token, all of it) and
    go on with anything get the ids of their own tokenization."""
    backend = BACKENDS[kind]
    texts = [reference] + [reference[: cut % (len(reference) + 1)] + rest for cut, rest in parts]
    encoded = SharedPrefixes(backend).encode(backend, texts, [None] + [0] * len(parts))
    assert [e.ids for e in encoded] == [whole(backend, text) for text in texts]


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "overlapping"])
def test_turns_are_derived_not_tokenized_again(kind: str) -> None:
    """Where a template writes its turn markers, a prompt and an earlier cut take the reference's
    ids up to the last marker and tokenize only what follows it."""
    backend = BACKENDS[kind]
    shared = SharedPrefixes(backend)
    start, end = TURN_MARKERS[BASE_OF.get(kind, kind)]
    turns = [f"{start}user\nWhat is {n} + {n}?{end}\n{start}assistant\nIt is {2 * n}.{end}\n" for n in range(5)]
    prompt = "".join(turns[:2]) + f"{start}user\nWhat is 2 + 2?{end}\n{start}assistant\n"
    texts = ["".join(turns), "".join(turns[:2]), prompt]
    sent: list[list[str]] = []
    encode_fast = backend.encode_batch_fast

    class Counting:
        """The backend, recording what is sent to be tokenized without offsets."""

        def __getattr__(self, name: str) -> object:
            return getattr(backend, name)

        def encode_batch_fast(self, batch: list[str], **options: object) -> object:
            sent.append(batch)
            return encode_fast(batch, **options)

    encoded = shared.encode(Counting(), texts, [None, 0, 0])
    assert [e.ids for e in encoded] == [whole(backend, text) for text in texts]
    assert sent == [[f"{end}\n", f"{start}assistant\n"]]  # two anchors and what follows each
    assert encoded[1].encoding is None and encoded[0].encoding is not None


def test_anchors_are_only_tokens_every_text_splits_at() -> None:
    """An added token is an anchor only where no other can cover its start or extend it, it is
    matched as written, and the tokenizer has no dropout; texts still come out exact without."""
    backend = Tokenizer.from_str((BASE / "byte_level.json").read_text(encoding="utf-8"))
    backend.add_tokens([AddedToken("<a>", normalized=False), AddedToken("x<a>", normalized=False),
                        AddedToken("<end>", normalized=False), AddedToken("<end>!", normalized=False),
                        AddedToken("<s>", normalized=False, lstrip=True), AddedToken("[m]", normalized=True),
                        AddedToken("[k]", normalized=False)])
    shared = SharedPrefixes(backend)
    assert sorted(shared.anchors.values()) == ["[k]", "x<a>"]  # "<" is inside "x<a>": no "<..." token
    texts = ["hi x<a> there<end>! and [k] more", "hi x<a> there<end>", "hi x<a> there<end>! and [k] m"]
    assert [e.ids for e in shared.encode(backend, texts, [None, 0, 0])] == [whole(backend, t) for t in texts]
    model = json.loads(backend.to_str())
    model["model"]["dropout"] = 0.5
    assert not SharedPrefixes(Tokenizer.from_str(json.dumps(model))).usable


def test_an_added_token_inside_another_is_no_anchor() -> None:
    """``<|im_end|>`` inside ``x<|im_end|>y``: in the reference it is matched alone, in the text the
    longer token covers it. Taken as an anchor, the text's ids would keep the reference's ``x``."""
    backend = BACKENDS["overlapping"]
    texts = ["a x<|im_end|>z", "a x<|im_end|>y b"]
    encoded = SharedPrefixes(backend).encode(backend, texts, [None, 0])
    assert [e.ids for e in encoded] == [whole(backend, text) for text in texts]


def test_common_prefix() -> None:
    assert common_prefix("abcdef", "abcxyz") == 3
    assert common_prefix("abc", "abcdef") == 3
    assert common_prefix("abcdef", "abc") == 3
    assert common_prefix("", "abc") == 0
    assert common_prefix("xbc", "abc") == 0
    assert common_prefix("a" * 1000 + "b", "a" * 1000 + "c") == 1000


# The renderer, deriving, against the renderer tokenizing every text whole.

def _conversation_texts() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(["Hi", " there", "\n", "  ", "42", "é中", "<think>", "</think>", "<|im_end|>",
                                     "<end_of_turn>", "▁x", "'s", "?"]), min_size=1, max_size=8).map("".join)


def _message(role: str, text: str, weight: float) -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "value": text}], "loss_weight": weight}


CONVERSATIONS = st.lists(st.tuples(_conversation_texts(), _conversation_texts(), st.sampled_from([1.0, 0.5, 0.0])),
                         min_size=1, max_size=4).map(lambda turns: {"messages": [
                             message for question, reply, weight in turns
                             for message in (_message("user", question, 0.0), _message("assistant", reply, weight))]})


@pytest.fixture(scope="module")
def renderers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Renderer, Renderer]]:
    """Per family: a renderer deriving ids, and one tokenizing every text whole (v1's two passes)."""
    pytest.importorskip("transformers")
    from dataidx.render import load_tokenizer

    from .conformance import build_tokenizer, families, template_text

    made = {}
    for spec in families():
        slug = spec["slug"]
        tokenizer = load_tokenizer(build_tokenizer(slug, tmp_path_factory.mktemp(slug)))
        deriving, whole = (Renderer(tokenizer, template_text(slug), cutoff=4096) for _ in range(2))
        whole.shared.usable = False
        made[slug] = (deriving, whole)
    return made


def _rendered(renderer: Renderer, *samples: dict[str, object]) -> list[dict[str, object]]:
    """Every cut of each sample drafted as ``dataidx render`` drafts a row, and the sample whole."""
    drafts = []
    for sample in samples:
        messages = sample["messages"]
        assert isinstance(messages, list)
        cuts = [k + 1 for k, message in enumerate(messages) if message["role"] == "assistant"]
        bounds = renderer.floors.cuts(sample, renderer.longest)
        drafts += renderer.draft_cuts(sample, cuts, bounds) + [renderer.draft(sample, False)]
    return [rendered.as_dict() | {"status": rendered.status, "detail": rendered.detail}
            for rendered in renderer.finish_many(drafts)]


@pytest.mark.slow
def test_renderer_derives_what_it_tokenized_twice(renderers: dict[str, tuple[Renderer, Renderer]]) -> None:
    """Every family's template, every entry of the hand-written conversations and of the shared
    golden data (cuts and pairs): the same ids, labels, weights, status and detail."""
    from .conformance.v1 import entries
    from .helpers import GOLDEN

    samples = [sample for _, _, cut, sample in entries(GOLDEN if GOLDEN.is_dir() else None) if cut is None]
    samples += [sample for _, _, cut, sample in entries(None) if cut is not None]
    rows = [sample for sample in samples if "messages" in sample]
    # Every 5th preference pair (long texts: all 310 took 35 s); tests/test_conformance.py holds
    # every one, rendered deriving, to v1's two passes.
    pairs = [(sample, False) for sample in samples if "messages" not in sample][::5]
    for slug, (deriving, whole) in renderers.items():
        derived, tokenized = _rendered(deriving, *rows), _rendered(whole, *rows)  # one batch: the suite's time
        if derived != tokenized:
            at = next(at for at, (one, other) in enumerate(zip(derived, tokenized, strict=True)) if one != other)
            raise AssertionError((slug, derived[at], tokenized[at]))
        assert ([r.as_dict() for r in deriving.render_many(pairs)]
                == [r.as_dict() for r in whole.render_many(pairs)]), slug


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(sample=CONVERSATIONS)
def test_renderer_derives_random_conversations(renderers: dict[str, tuple[Renderer, Renderer]],
                                               sample: dict[str, object]) -> None:
    for slug, (deriving, whole) in renderers.items():
        assert _rendered(deriving, sample) == _rendered(whole, sample), slug

"""Rendering entries: the same ids as apply_chat_template, labels by character spans, one BOS,
supervised end-of-turn tokens, truncation with statuses. Tokenizers are trained in the test."""

from __future__ import annotations

import json
import re

import pytest

from dataidx.errors import RenderError
from dataidx.render import BUILTIN_TEMPLATES, IGNORE, Renderer, chat_messages, choose_template

from .conftest import train_tokenizer

pytest.importorskip("transformers")

TOOLS = json.dumps([{"name": "lookup", "description": "find a word", "parameters": {"type": "object"}}])


def text(role: str, value: str, weight: float) -> dict:
    return {"role": role, "content": [{"type": "text", "value": value}], "loss_weight": weight}


CONVERSATION = [
    text("system", "Be brief.", 0.0),
    text("user", "hello world", 0.0),
    text("assistant", "The answer is 42.", 1.0),
    text("user", "how are you?", 0.0),
    {"role": "assistant", "content": [{"type": "tool_call", "value": json.dumps(
        {"name": "lookup", "arguments": {"word": "fine"}})}], "loss_weight": 1.0},
    text("tool", '{"meaning": "well"}', 0.0),
    text("assistant", "I am fine, thanks.", 0.5),
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


@pytest.fixture(scope="module")
def bos_tokenizer():
    return train_tokenizer(add_bos=True)


def supervised(rendered) -> list[bool]:
    return [label != IGNORE for label in rendered.labels]


@pytest.mark.parametrize("name", sorted(BUILTIN_TEMPLATES))
def test_ids_and_labels_equal_apply_chat_template_with_assistant_masks(tokenizer, name: str) -> None:
    template = BUILTIN_TEMPLATES[name]
    rendered = Renderer(tokenizer, template, cutoff=4096).render({"messages": CONVERSATION, "tools": TOOLS},
                                                                 has_cut=False)
    reference = tokenizer.apply_chat_template(
        chat_messages(CONVERSATION), tools=json.loads(TOOLS), chat_template=template, tokenize=True,
        return_dict=True, return_assistant_tokens_mask=True,
    )
    assert rendered.status == "ok"
    assert rendered.input_ids == reference["input_ids"]
    assert supervised(rendered) == [bool(m) for m in reference["assistant_masks"]]
    weights = {w for w, s in zip(rendered.loss_weights, supervised(rendered)) if s}
    assert weights == {1.0, 0.5}
    assert all(w == 0.0 for w, s in zip(rendered.loss_weights, supervised(rendered)) if not s)
    assert rendered.as_dict()["attention_mask"] == [1] * len(rendered.input_ids)


@pytest.mark.parametrize("name", sorted(BUILTIN_TEMPLATES))
@pytest.mark.parametrize("has_cut", [False, True])
def test_generation_blocks_and_prefix_rendering_find_the_same_spans(tokenizer, name: str, has_cut: bool) -> None:
    # Hub templates rarely have {% generation %}: without it, spans come from rendering prefixes.
    template = BUILTIN_TEMPLATES[name]
    bare = re.sub(r"\{% (end)?generation %\}", "", template)
    assert bare != template
    sample = {"messages": CONVERSATION, "tools": TOOLS}
    tracked = Renderer(tokenizer, template, cutoff=4096).render(sample, has_cut=has_cut)
    prefixed = Renderer(tokenizer, bare, cutoff=4096).render(sample, has_cut=has_cut)
    assert (tracked.input_ids, tracked.labels, tracked.loss_weights) == \
        (prefixed.input_ids, prefixed.labels, prefixed.loss_weights)
    assert tracked.supervised_tokens > 0


@pytest.mark.parametrize(("name", "terminator"), [("chatml", "<|im_end|>"), ("llama3", "<|eot_id|>"),
                                                  ("internlm2", "<|im_end|>"), ("plain", "</s>"), ("llama2", "</s>")])
def test_an_entry_with_a_cut_supervises_its_last_turn_through_the_terminator(tokenizer, name: str,
                                                                             terminator: str) -> None:
    entry = CONVERSATION[:3]  # the entry of cut 3: supervise "The answer is 42." only
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render({"messages": entry}, has_cut=True)
    labelled = [label for label in rendered.labels if label != IGNORE]
    assert tokenizer.decode(labelled).strip().startswith("The answer is 42.")
    assert labelled[-1] == tokenizer.convert_tokens_to_ids(terminator)
    # Nothing before the answer is supervised: labels form one contiguous stretch at the end.
    first = supervised(rendered).index(True)
    assert all(supervised(rendered)[first : first + len(labelled)])


def test_the_last_message_alone_is_supervised_when_there_is_a_cut(tokenizer) -> None:
    renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096)
    cut = renderer.render({"messages": CONVERSATION}, has_cut=True)
    whole = renderer.render({"messages": CONVERSATION}, has_cut=False)
    assert cut.input_ids == whole.input_ids
    assert 0 < cut.supervised_tokens < whole.supervised_tokens
    assert tokenizer.decode([label for label in cut.labels if label != IGNORE]) == "I am fine, thanks.<|im_end|>"


def test_exactly_one_bos(bos_tokenizer) -> None:
    bos = bos_tokenizer.bos_token_id
    for name in ("llama2", "plain", "chatml"):  # llama2 writes bos_token itself; the others do not
        rendered = Renderer(bos_tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render(
            {"messages": CONVERSATION[:3]}, has_cut=True)
        assert rendered.input_ids[0] == bos and rendered.input_ids.count(bos) == 1, name
        assert rendered.labels[0] == IGNORE


def test_a_bpe_merge_across_the_prompt_boundary_keeps_supervision(tokenizer) -> None:
    # The plain template's prompt ends with a space that BPE merges into the answer's first word.
    entry = [text("user", "hello", 0.0), text("assistant", "world", 1.0)]
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=4096).render({"messages": entry}, has_cut=True)
    tokens = tokenizer.convert_ids_to_tokens(rendered.input_ids)
    assert "Ġworld" in tokens  # one token holding the boundary space and the answer
    assert rendered.input_ids == tokenizer("User: hello\nAssistant: world</s>\n", add_special_tokens=False).input_ids
    labelled = tokenizer.decode([label for label in rendered.labels if label != IGNORE])
    assert labelled == " world</s>"
    # Tokenizing prompt and answer apart (the classic approach) gives other ids than the model sees.
    apart = tokenizer("User: hello\nAssistant: ", add_special_tokens=False).input_ids + \
        tokenizer("world</s>\n", add_special_tokens=False).input_ids
    assert apart != rendered.input_ids


def test_truncation_policies_and_statuses(bos_tokenizer) -> None:
    long_prompt = [text("user", "hello world " * 40, 0.0), text("assistant", "The answer is 42.", 1.0)]
    template = BUILTIN_TEMPLATES["plain"]
    full = Renderer(bos_tokenizer, template, cutoff=4096).render({"messages": long_prompt}, has_cut=True)
    cutoff = full.tokens - 5

    dropped = Renderer(bos_tokenizer, template, cutoff, "drop").render({"messages": long_prompt}, has_cut=True)
    assert (dropped.status, dropped.full_tokens) == ("too_long", full.tokens)
    assert "cutoff" in dropped.detail

    right = Renderer(bos_tokenizer, template, cutoff, "right").render({"messages": long_prompt}, has_cut=True)
    assert right.tokens == cutoff and right.input_ids == full.input_ids[:cutoff]
    assert right.status == "truncated" and right.supervised_tokens < full.supervised_tokens

    left = Renderer(bos_tokenizer, template, cutoff, "left").render({"messages": long_prompt}, has_cut=True)
    assert left.tokens == cutoff and left.input_ids[0] == bos_tokenizer.bos_token_id
    assert left.input_ids[1:] == full.input_ids[-(cutoff - 1):]
    assert (left.status, left.supervised_tokens) == ("truncated", full.supervised_tokens)

    # Cut so short that the answer is gone: never trained on silently (LLaMA-Factory #3995).
    gone = Renderer(bos_tokenizer, template, 10, "right").render({"messages": long_prompt}, has_cut=True)
    assert gone.status == "no_supervision" and "truncation" in gone.detail


@pytest.mark.parametrize("name", sorted(BUILTIN_TEMPLATES))
def test_reasoning_blocks_render_before_the_answer_and_are_supervised(tokenizer, name: str) -> None:
    answer = {"role": "assistant", "loss_weight": 1.0, "content": [
        {"type": "reasoning", "value": "user asks"}, {"type": "text", "value": "The answer is 42."}]}
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render(
        {"messages": [CONVERSATION[1], answer]}, has_cut=True)
    labelled = tokenizer.decode([label for label in rendered.labels if label != IGNORE])
    assert "<think>\nuser asks\n</think>\n\nThe answer is 42." in labelled


def test_preference_sides_render_separately(tokenizer) -> None:
    sample = {"chosen_messages": CONVERSATION[1:3], "rejected_messages": [CONVERSATION[1], text("assistant", "no", 1.0)]}
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096).render(sample, has_cut=False)
    sides = rendered.as_dict()
    assert set(sides) == {"chosen", "rejected"}
    assert rendered.tokens == len(sides["chosen"]["input_ids"]) + len(sides["rejected"]["input_ids"])
    assert tokenizer.decode([x for x in sides["rejected"]["labels"] if x != IGNORE]) == "no<|im_end|>"


def test_errors_become_statuses_with_messages(tokenizer) -> None:
    renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096)
    late_system = renderer.render({"messages": [CONVERSATION[1], CONVERSATION[0]]}, has_cut=False)
    assert late_system.status == "render_error" and "system message must come first" in late_system.detail
    bad_call = renderer.render({"messages": [{"role": "assistant", "content": [{"type": "tool_call", "value": "{"}]}]},
                               has_cut=True)
    assert bad_call.status == "render_error" and "tool call" in bad_call.detail
    nothing = renderer.render({"messages": CONVERSATION[:2]}, has_cut=False)
    assert nothing.status == "no_supervision"


def test_a_template_that_is_not_prefix_stable_is_reported(tokenizer) -> None:
    # Renders only the last message: no prefix of the conversation is a prefix of the text.
    odd = "{{ messages[-1].content if messages else '' }}{% if add_generation_prompt %}>{% endif %}"
    rendered = Renderer(tokenizer, odd, cutoff=4096).render({"messages": CONVERSATION[1:3]}, has_cut=True)
    assert rendered.status == "render_error" and "prefixes" in rendered.detail


def test_template_choice(tokenizer, tiny_tokenizer) -> None:
    from transformers import AutoTokenizer

    with pytest.raises(RenderError, match="no chat_template"):
        choose_template(tokenizer, None)
    with pytest.raises(RenderError, match="unknown template 'vicuna'.*chatml"):
        choose_template(tokenizer, "vicuna")
    own = AutoTokenizer.from_pretrained(tiny_tokenizer)
    assert choose_template(own, None) == ("tokenizer", BUILTIN_TEMPLATES["chatml"])
    with pytest.raises(RenderError, match="cutoff"):
        Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=0)
    with pytest.raises(RenderError, match="truncation"):
        Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=8, truncation="middle")

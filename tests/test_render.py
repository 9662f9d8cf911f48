"""Rendering entries: the same ids as apply_chat_template, LLaMA-Factory v1's labels, characters where
v1 has no answer, no BOS behind the template's back, truncation with statuses. Tokenizers are trained in the test."""

from __future__ import annotations

import json

import pytest

from dataidx.errors import RenderError
from dataidx.render import BUILTIN_TEMPLATES, IGNORE, Renderer, chat_messages, choose_template

from .helpers import train_tokenizer

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


def v1_reference(tokenizer, template: str, messages: list[dict], tools: list | None = None) -> tuple[list, list, list]:
    """LLaMA-Factory v1's rule computed with ``apply_chat_template``: every token after the prompt
    (``messages[:-1]`` with the generation prompt) is supervised with the last turn's weight."""
    chat = chat_messages(messages)
    ids = tokenizer.apply_chat_template(chat, tools=tools, chat_template=template, tokenize=True, return_dict=True)
    prompt = tokenizer.apply_chat_template(chat[:-1], tools=tools, chat_template=template, tokenize=True,
                                           return_dict=True, add_generation_prompt=True)
    ids, start, weight = ids["input_ids"], len(prompt["input_ids"]), messages[-1]["loss_weight"]
    assert ids[:start] == prompt["input_ids"]
    return ids, [IGNORE] * start + ids[start:], [0.0] * start + [weight] * (len(ids) - start)


# ``plain``'s prompt ends with a space that BPE merges into the answer: no token prefix (see below).
@pytest.mark.parametrize("name", sorted(set(BUILTIN_TEMPLATES) - {"plain"}))
@pytest.mark.parametrize("turns", [3, 7])
def test_ids_and_labels_equal_v1s_rule_over_apply_chat_template(tokenizer, name: str, turns: int) -> None:
    entry = CONVERSATION[:turns]
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render(
        {"messages": entry, "tools": TOOLS}, has_cut=True)
    assert rendered.status == "ok"
    assert (rendered.input_ids, rendered.labels, rendered.loss_weights) == \
        v1_reference(tokenizer, BUILTIN_TEMPLATES[name], entry, json.loads(TOOLS))
    assert rendered.as_dict()["attention_mask"] == [1] * len(rendered.input_ids)


@pytest.mark.parametrize(("name", "tail"), [("chatml", "<|im_end|>\n"), ("llama3", "<|eot_id|>"),
                                            ("internlm2", "<|im_end|>\n"), ("plain", "</s>\n"), ("llama2", "</s>")])
def test_the_last_turn_is_supervised_through_whatever_the_template_writes_after_it(tokenizer, name: str,
                                                                                 tail: str) -> None:
    entry = CONVERSATION[:3]  # the entry of cut 3: supervise "The answer is 42." only
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render({"messages": entry}, has_cut=True)
    labelled = tokenizer.decode([label for label in rendered.labels if label != IGNORE])
    assert labelled.strip().startswith("The answer is 42.") and labelled.endswith(tail)
    # Nothing before the answer is supervised: labels form one stretch to the end.
    first = supervised(rendered).index(True)
    assert all(supervised(rendered)[first:])


def test_only_the_last_turn_is_supervised_as_in_v1(tokenizer) -> None:
    renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096)
    cut = renderer.render({"messages": CONVERSATION}, has_cut=True)
    whole = renderer.render({"messages": CONVERSATION}, has_cut=False)  # v1 renders every sample so
    assert (cut.input_ids, cut.labels, cut.loss_weights) == (whole.input_ids, whole.labels, whole.loss_weights)
    assert tokenizer.decode([label for label in cut.labels if label != IGNORE]) == "I am fine, thanks.<|im_end|>\n"
    assert {w for w, s in zip(cut.loss_weights, supervised(cut)) if s} == {0.5}


def test_a_conversation_not_ending_with_an_assistant_supervises_its_weighted_messages(tokenizer) -> None:
    # v1 refuses these; dataidx locates every weighted message by characters instead.
    entry = [*CONVERSATION[:3], text("user", "thanks", 0.0)]
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096).render({"messages": entry}, has_cut=False)
    assert tokenizer.decode([label for label in rendered.labels if label != IGNORE]) == \
        "The answer is 42.<|im_end|>\n"


def test_no_bos_is_added_behind_the_templates_back(bos_tokenizer) -> None:
    bos = bos_tokenizer.bos_token_id
    for name in ("llama2", "plain", "chatml", "llama3", "internlm2"):  # every built-in writes bos_token itself
        rendered = Renderer(bos_tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render(
            {"messages": CONVERSATION[:3]}, has_cut=True)
        assert rendered.input_ids[0] == bos and rendered.input_ids.count(bos) == 1, name
        assert rendered.labels[0] == IGNORE
    # A template that writes none gets none, as with apply_chat_template and v1.
    bare = "{% for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}"
    rendered = Renderer(bos_tokenizer, bare, cutoff=4096).render({"messages": CONVERSATION[1:3]}, has_cut=True)
    assert bos not in rendered.input_ids


def test_where_the_prompt_is_no_token_prefix_characters_decide(tokenizer) -> None:
    # The plain template's prompt ends with a space that BPE merges into the answer's first word,
    # so the prompt's ids are no prefix of the whole's (v1 raises here): the merged token holds
    # answer characters and is supervised.
    entry = [text("user", "hello", 0.0), text("assistant", "world", 1.0)]
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=4096).render({"messages": entry}, has_cut=True)
    tokens = tokenizer.convert_ids_to_tokens(rendered.input_ids)
    assert "Ġworld" in tokens  # one token holding the boundary space and the answer
    assert rendered.input_ids == tokenizer("<s>User: hello\nAssistant: world</s>\n", add_special_tokens=False).input_ids
    prompt = tokenizer("<s>User: hello\nAssistant: ", add_special_tokens=False).input_ids
    assert rendered.input_ids[: len(prompt)] != prompt
    labelled = tokenizer.decode([label for label in rendered.labels if label != IGNORE])
    assert labelled == " world</s>\n"


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


@pytest.mark.parametrize("name", sorted(set(BUILTIN_TEMPLATES) - {"fallback"}))  # v1's fallback writes no reasoning
def test_reasoning_blocks_render_before_the_answer_and_are_supervised(tokenizer, name: str) -> None:
    answer = {"role": "assistant", "loss_weight": 1.0, "content": [
        {"type": "reasoning", "value": "user asks"}, {"type": "text", "value": "The answer is 42."}]}
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES[name], cutoff=4096).render(
        {"messages": [CONVERSATION[1], answer]}, has_cut=True)
    labelled = tokenizer.decode([label for label in rendered.labels if label != IGNORE])
    assert "<think>\nuser asks\n</think>\n\nThe answer is 42." in labelled


def test_preference_sides_render_separately(tokenizer) -> None:
    sample = {"chosen_messages": CONVERSATION[1:3],
              "rejected_messages": [CONVERSATION[1], text("assistant", "no", 1.0)]}
    rendered = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096).render(sample, has_cut=False)
    sides = rendered.as_dict()
    assert set(sides) == {"chosen", "rejected"}
    assert rendered.tokens == len(sides["chosen"]["input_ids"]) + len(sides["rejected"]["input_ids"])
    assert tokenizer.decode([x for x in sides["rejected"]["labels"] if x != IGNORE]) == "no<|im_end|>\n"


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
    assert rendered.status == "render_error" and rendered.cause == "rewrites_turns"
    assert "differently once the turn is added: from character 0, 'hello world>' becomes" in rendered.detail


def test_template_choice(tokenizer, tiny_tokenizer) -> None:
    from transformers import AutoTokenizer

    assert choose_template(tokenizer, None) == ("fallback", BUILTIN_TEMPLATES["fallback"])  # v1's, as v1 does
    with pytest.raises(RenderError, match="unknown template 'vicuna'.*chatml"):
        choose_template(tokenizer, "vicuna")
    own = AutoTokenizer.from_pretrained(tiny_tokenizer)
    assert choose_template(own, None) == ("tokenizer", BUILTIN_TEMPLATES["chatml"])
    with pytest.raises(RenderError, match="cutoff"):
        Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=0)
    with pytest.raises(RenderError, match="truncation"):
        Renderer(tokenizer, BUILTIN_TEMPLATES["plain"], cutoff=8, truncation="middle")


# What a template sees, written out: every variable and field that v1's inputs differ in.
_INPUTS_TEMPLATE = (
    "{{ 'tools=' ~ (tools | tojson) ~ ' documents=' ~ (documents is none) ~ '\n' }}"
    "{% for message in messages %}{{ message | tojson }}{{ '\n' }}"
    "{% if message.thinking %}{{ 'thinking:' ~ message.thinking ~ '\n' }}{% endif %}{% endfor %}"
)


@pytest.mark.parametrize("tools", ["[]", TOOLS, json.dumps({"name": "one"}), ""])
def test_a_template_sees_what_apply_chat_template_shows_it_from_v1s_messages(tokenizer, tools: str) -> None:
    """v1 (ff6d4d12) passes ``json.loads(tools)`` (so ``"[]"`` is ``[]``, which Llama 3.1 renders as a
    tools preamble; one schema is wrapped in a list) and messages as role, content, tool_calls,
    reasoning_content; transformers then copies reasoning into ``thinking`` (gpt-oss reads it) and
    passes ``documents``. Pinned against this transformers: a release that changes it fails here."""
    messages = [text("user", "hi", 0.0),
                {"role": "assistant", "loss_weight": 1.0, "content": [
                    {"type": "reasoning", "value": "think first"}, {"type": "text", "value": "ok"},
                    {"type": "tool_call", "value": json.dumps({"name": "lookup", "arguments": {"w": 1}})}]}]
    ours = chat_messages(messages)
    v1_messages = [{key: value for key, value in message.items() if key != "thinking"} for message in ours]
    assert [list(message) for message in v1_messages] == [["role", "content"],
                                                           ["role", "content", "tool_calls", "reasoning_content"]]
    v1_tools = None
    if tools:
        v1_tools = json.loads(tools)
        v1_tools = v1_tools if isinstance(v1_tools, list) else [v1_tools]
    expected = tokenizer.apply_chat_template(v1_messages, tools=v1_tools, chat_template=_INPUTS_TEMPLATE,
                                             tokenize=False)
    assert "thinking:think first" in expected  # transformers' alias, which dataidx follows
    rendered = Renderer(tokenizer, _INPUTS_TEMPLATE, cutoff=4096).render({"messages": messages, "tools": tools},
                                                                        has_cut=True)
    assert rendered.status == "ok", rendered.detail
    assert tokenizer.decode(rendered.input_ids) == expected


def test_tools_that_are_not_schemas_and_a_prompt_less_turn_are_refused_as_v1_refuses_them(tokenizer) -> None:
    renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096)
    pair = [text("user", "hi", 0.0), text("assistant", "ok", 1.0)]
    # apply_chat_template raises on a schema that is not a dict ("Tools should either be a JSON schema...").
    for tools in ("[1]", "null", '"lookup"'):
        rendered = renderer.render({"messages": pair, "tools": tools}, has_cut=True)
        assert rendered.status == "render_error" and "not a tool schema" in rendered.detail, tools
    # v1 renders messages[:-1] with the generation prompt: an empty conversation, which apply_chat_template refuses.
    with pytest.raises(ValueError, match="empty conversation"):
        tokenizer.apply_chat_template([], chat_template=BUILTIN_TEMPLATES["chatml"], tokenize=False,
                                      add_generation_prompt=True)
    alone = renderer.render({"messages": pair[1:]}, has_cut=True)
    assert alone.status == "render_error" and "first message" in alone.detail


@pytest.mark.parametrize("attack", [
    "{{ messages.append(messages[0]) }}",            # a mutating method of a list (ImmutableSandbox)
    "{{ messages[0].update({'role': 'x'}) }}",       # ... of a dict
    "{{ messages.__class__.__mro__ }}",               # internal attributes
    "{{ loop_free.__init__ if false else messages[0].content.__class__.__base__ }}",
])
def test_the_sandboxs_shortcuts_keep_its_verdicts(tokenizer, attack: str) -> None:
    """Lookups and method calls the sandbox judged safe once are taken directly afterwards (speed);
    everything it refuses is still refused, after a warm-up that took the shortcuts."""
    warm = "{% for m in messages %}{{ m.content.strip() ~ m.role.upper() ~ loop.index }}{% endfor %}"
    renderer = Renderer(tokenizer, warm + attack, cutoff=4096)
    entry = {"messages": CONVERSATION[1:3]}
    Renderer(tokenizer, warm, cutoff=4096).render(entry, has_cut=True)  # the shortcuts are warm
    rendered = renderer.render(entry, has_cut=True)
    assert rendered.status == "render_error", attack
    # format reaches attributes through the sandbox's own formatter, which writes nothing for them
    leak = Renderer(tokenizer, warm + "{{ '{0.__class__}'.format(messages) }}", cutoff=4096).render(entry, has_cut=True)
    assert "class" not in tokenizer.decode(leak.input_ids)

"""The Python renderers of built-in templates write exactly what their Jinja writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataidx.errors import RenderError
from dataidx.render import FAST_TEMPLATES, compile_template

from .helpers import examples

TEXT = st.text(alphabet=st.sampled_from(list("ab \n<>|{}\"'\\é")), max_size=6)
ARGUMENTS = st.one_of(TEXT, st.dictionaries(st.sampled_from(["x", "y", "ü"]), st.one_of(TEXT, st.integers()),
                                            max_size=2))
CALL = st.builds(lambda name, arguments: {"type": "function", "function": {"name": name, "arguments": arguments}},
                 TEXT, ARGUMENTS)


@st.composite
def messages(draw: st.DrawFn) -> dict:
    message = {"role": draw(st.sampled_from(["system", "user", "assistant", "tool", "observation", "x"])),
               "content": draw(TEXT)}
    if message["role"] == "assistant":
        if draw(st.booleans()):
            message["reasoning_content"] = draw(TEXT)
        if draw(st.booleans()):
            message["tool_calls"] = draw(st.lists(CALL, max_size=3))
    return message


TOOLS = st.one_of(st.none(), st.lists(st.fixed_dictionaries({"name": TEXT, "parameters": st.dictionaries(TEXT, TEXT,
                                                                                                          max_size=2)}),
                                      max_size=2))


@pytest.mark.parametrize("template", list(FAST_TEMPLATES))
@settings(max_examples=examples(400))
@given(chat=st.lists(messages(), max_size=6), tools=TOOLS, generation=st.booleans(),
       bos=st.sampled_from([None, "", "<s>"]))
def test_fast_renderer_writes_what_jinja_writes(template: str, chat: list, tools: list | None, generation: bool,
                                                bos: str | None) -> None:
    import jinja2

    try:
        expected = compile_template(template).render(messages=chat, tools=tools, add_generation_prompt=generation,
                                                     bos_token=bos, eos_token="</s>", enable_thinking=True)
    except jinja2.TemplateError as exc:
        with pytest.raises(RenderError, match=str(exc)):
            FAST_TEMPLATES[template](chat, tools, generation, bos)
        return
    assert FAST_TEMPLATES[template](chat, tools, generation, bos) == expected

"""Built-in chat templates for tokenizers that ship none, and choosing the template of a spec.

Each built-in is a Hugging Face style Jinja chat template (``messages``, ``tools``,
``add_generation_prompt``, the tokenizer's special tokens), so ``apply_chat_template`` renders
exactly the same text. Assistant turns are wrapped in ``{% generation %}`` around the content and
the end-of-turn token (Hugging Face's assistant mask), and each writes ``bos_token`` itself when
the tokenizer has one: nothing is added behind the template's back. Templates are written as
joined pieces with every newline spelled ``'\\n'``, so Jinja's whitespace rules cannot add or
eat any.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import RenderError


def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """The ``tojson`` filter the templates are written against, as ``transformers`` defines it."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

_SYSTEM_FIRST = "{%- if messages and messages[0].role == 'system' %}{% set system = messages[0].content %}" \
    "{% set rest = messages[1:] %}{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}"
_SYSTEM_LATE = "{{- raise_exception('a system message must come first') }}"
# Arguments kept as a JSON string by the data (v1 passes them on as they are) are written verbatim.
_CALL_JSON = "{%- if call.function.arguments is string %}" \
    "{{- '{\"name\": ' + (call.function.name | tojson) + ', \"arguments\": ' + call.function.arguments + '}' }}" \
    "{%- else %}{{- {'name': call.function.name, 'arguments': call.function.arguments} | tojson }}{%- endif %}"
_TOOLS_JSON = "{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}"
# Reasoning (v1's "reasoning" blocks, HF's reasoning_content) before the answer, supervised with it.
_REASONING = ("{%- if message.reasoning_content %}"
              "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' }}{%- endif %}")

CHATML = "".join([
    "{{- bos_token or '' }}",
    "{%- if tools %}",
    "{{- '<|im_start|>system\\n' }}",
    "{%- if messages and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n'",
    " + 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}",
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}",
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '",
    " + 'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n'",
    " + '{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}",
    "{%- elif messages and messages[0].role == 'system' %}",
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
    "{%- endif %}",
    "{%- for message in messages %}",
    "{%- if message.role == 'system' %}{%- if not loop.first %}", _SYSTEM_LATE, "{%- endif %}",
    "{%- elif message.role == 'assistant' %}",
    "{{- '<|im_start|>assistant\\n' }}{% generation %}", _REASONING, "{{- message.content or '' }}",
    "{%- for call in message.tool_calls or [] %}",
    "{{- ('\\n' if (message.content or not loop.first) else '') + '<tool_call>\\n' }}", _CALL_JSON,
    "{{- '\\n</tool_call>' }}{%- endfor %}",
    "{{- '<|im_end|>' }}{% endgeneration %}{{- '\\n' }}",
    "{%- elif message.role == 'tool' %}",
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}",
    "{%- else %}",
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
])

LLAMA3 = "".join([
    "{{- bos_token or '' }}", _SYSTEM_FIRST,
    "{%- if system or tools %}",
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}",
    "{%- if tools %}",
    "{{- 'You have access to the following functions. To call a function, respond with JSON of the form '",
    " + '{\"name\": function name, \"parameters\": dictionary of argument name and its value}.\\n\\n' }}",
    "{%- for tool in tools %}{{- (tool | tojson(indent=4)) + '\\n\\n' }}{%- endfor %}",
    "{%- endif %}",
    "{{- (system | trim) + '<|eot_id|>' }}",
    "{%- endif %}",
    "{%- for message in rest %}",
    "{%- if message.role == 'assistant' %}",
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% generation %}", _REASONING,
    "{%- if message.tool_calls %}{%- for call in message.tool_calls %}",
    "{%- if call.function.arguments is string %}",
    "{{- '{\"name\": ' + (call.function.name | tojson) + ', \"parameters\": ' + call.function.arguments + '}' }}",
    "{%- else %}{{- {'name': call.function.name, 'parameters': call.function.arguments} | tojson }}{%- endif %}",
    "{%- endfor %}{%- else %}{{- (message.content or '') | trim }}{%- endif %}",
    "{{- '<|eot_id|>' }}{% endgeneration %}",
    "{%- elif message.role == 'tool' %}",
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + (message.content | trim) + '<|eot_id|>' }}",
    "{%- elif message.role == 'system' %}", _SYSTEM_LATE,
    "{%- else %}",
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + (message.content | trim) + '<|eot_id|>' }}",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
])

LLAMA2 = "".join([
    _SYSTEM_FIRST,
    "{%- if tools %}{% set system = system + ('\\n\\n' if system else '') + 'Tools:\\n'",
    " + (tools | map('tojson') | join('\\n')) %}{%- endif %}",
    "{%- for message in rest %}",
    "{%- if message.role == 'user' or message.role == 'tool' %}",
    "{{- (bos_token or '') + '[INST] ' }}",
    "{%- if loop.first and system %}{{- '<<SYS>>\\n' + (system | trim) + '\\n<</SYS>>\\n\\n' }}{%- endif %}",
    "{{- (message.content | trim) + ' [/INST]' }}",
    "{%- elif message.role == 'assistant' %}",
    "{% generation %}{{- ' ' }}", _REASONING, "{{- (message.content or '') | trim }}",
    "{%- for call in message.tool_calls or [] %}", _CALL_JSON, "{%- endfor %}",
    "{{- ' ' + (eos_token or '') }}{% endgeneration %}",
    "{%- else %}", _SYSTEM_LATE,
    "{%- endif %}",
    "{%- endfor %}",
])

INTERNLM2 = "".join([
    "{{- bos_token or '' }}", _SYSTEM_FIRST,
    "{%- if system %}{{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' }}{%- endif %}",
    "{%- if tools %}{{- '<|im_start|>system name=<|plugin|>\\n' + (tools | tojson) + '<|im_end|>\\n' }}{%- endif %}",
    "{%- for message in rest %}",
    "{%- if message.role == 'assistant' %}",
    "{{- '<|im_start|>assistant\\n' }}{% generation %}", _REASONING, "{{- message.content or '' }}",
    "{%- for call in message.tool_calls or [] %}{{- '<|action_start|><|plugin|>\\n' }}", _CALL_JSON,
    "{{- '<|action_end|>' }}{%- endfor %}",
    "{{- '<|im_end|>' }}{% endgeneration %}{{- '\\n' }}",
    "{%- elif message.role == 'tool' %}",
    "{{- '<|im_start|>environment name=<|plugin|>\\n' + message.content + '<|im_end|>\\n' }}",
    "{%- elif message.role == 'system' %}", _SYSTEM_LATE,
    "{%- else %}",
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
])

PLAIN = "".join([
    "{{- bos_token or '' }}", _SYSTEM_FIRST,
    "{%- if system %}{{- system + '\\n\\n' }}{%- endif %}",
    "{%- if tools %}{{- 'Tools:\\n' }}", _TOOLS_JSON, "{{- '\\n' }}{%- endif %}",
    "{%- for message in rest %}",
    "{%- if message.role == 'assistant' %}",
    "{{- 'Assistant: ' }}{% generation %}", _REASONING, "{{- message.content or '' }}",
    "{%- for call in message.tool_calls or [] %}", _CALL_JSON, "{%- endfor %}",
    "{{- eos_token or '' }}{% endgeneration %}{{- '\\n' }}",
    "{%- elif message.role == 'tool' %}{{- 'Tool: ' + message.content + '\\n' }}",
    "{%- elif message.role == 'system' %}", _SYSTEM_LATE,
    "{%- else %}{{- 'User: ' + message.content + '\\n' }}",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- 'Assistant: ' }}{%- endif %}",
])

#: LLaMA-Factory v1's fallback for a tokenizer with no chat_template (``_FALLBACK_CHATML_JINJA``,
#: ``core/rendering/format.py`` at ff6d4d12; its Renderer sets it in ``_render_messages``): ChatML
#: without tools, BOS, EOS or ``{% generation %}``. Copied verbatim, so the same entries render the
#: same ids as v1's; kept apart from ``chatml``, whose text (and so fingerprint) differs.
FALLBACK = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{'<|im_start|>assistant\n'}}"
    "{% endif %}"
)

#: Built-in templates by name. ``qwen`` is the ChatML one, which writes tools and calls in Qwen2.5's
#: format (``<tools>`` in the system turn, ``<tool_call>`` JSON); unlike Qwen's own template it adds
#: no default system prompt and gives each tool result its own turn. Prefer a Qwen tokenizer's own
#: chat_template (the default) when it has one.
BUILTIN_TEMPLATES = {
    "chatml": CHATML,
    "qwen": CHATML,
    "llama3": LLAMA3,
    "llama2": LLAMA2,
    "internlm2": INTERNLM2,
    "plain": PLAIN,
    "fallback": FALLBACK,
}


def choose_template(tokenizer: Any, name: str | None) -> tuple[str, str]:
    """``(name, text)`` of the template to render with.

    ``None`` takes the tokenizer's own ``chat_template``, or v1's :data:`FALLBACK` (named
    ``fallback``) when it has none, as v1's Renderer does; otherwise a built-in name, or a path to
    a Jinja file. Raises RenderError naming the choices when none applies.
    """
    choices = ", ".join(BUILTIN_TEMPLATES)
    if name is None:
        own = getattr(tokenizer, "chat_template", None)
        if not own:
            return "fallback", FALLBACK
        if isinstance(own, dict):
            own = own.get("default")
        if not own:  # named templates and no default: transformers (so v1) refuses it too
            raise RenderError("the tokenizer has named chat templates and none is 'default'; pass --template "
                              f"(one of {choices}, or a .jinja file)")
        return "tokenizer", own
    if name in BUILTIN_TEMPLATES:
        return name, BUILTIN_TEMPLATES[name]
    path = Path(name)
    if path.is_file():
        try:
            return str(path.resolve()), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RenderError(f"{path}: cannot read template: {exc}") from None
    raise RenderError(f"unknown template '{name}' (built-in: {choices}; or a path to a .jinja file)")

"""Render a standard sample to chat text, and find by characters where a message lies in it.

The Jinja environment is the one Hugging Face's ``apply_chat_template`` uses (sandboxed,
``trim_blocks``/``lstrip_blocks``, ``loopcontrols``, its ``tojson``, ``raise_exception`` and
``strftime_now``; ``{% generation %}`` renders its body), so the text is identical. Messages are
converted as LLaMA-Factory v1 converts them, with control-token strings in data text broken
(:mod:`.escape`). Where the renderer cannot use v1's token diff, a message is located by
rendering prefixes of the conversation: message ``i`` spans from the end of ``messages[:i]`` with
the generation prompt to the end of ``messages[:i + 1]``. A template that does not render a
conversation as its prefixes render is reported, never guessed at.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..convert import ROLES, SUPERVISED_EPSILON
from ..errors import RenderError, bounded, shown
from . import sandbox
from .causes import describe_cause, prefix_cause, template_cause
from .escape import ControlTokens
from .fast_templates import FAST_TEMPLATES
from .sandbox import TEMPLATE_CHARACTERS, budgeted_environment, start, written
from .templates import tojson

#: Placeholder text for media blocks, as LLaMA-Factory's text templates write them.
_MEDIA_TEXT = {"image_url": "<image>", "image": "<image>", "video_url": "<video>", "video": "<video>",
               "audio_url": "<audio>", "audio": "<audio>"}


@dataclass(frozen=True)
class SupervisedChars:
    """Characters ``start:end`` of the rendered text are supervised with ``weight`` (a span of
    characters, which :func:`~.rendered.label_tokens` turns into token labels)."""

    start: int
    end: int
    weight: float


# Hugging Face's ``{% generation %}...{% endgeneration %}`` marks assistant tokens for its masks;
# rendering needs only its body, so it becomes an always-true ``if`` with the same whitespace
# control: the same text, without a call per assistant turn.
_GENERATION_TAG = re.compile(r"\{%(-?)\s*(end)?generation\s*(-?)%\}")


def _plain_block(tag: re.Match[str]) -> str:
    before, end, after = tag.groups()
    return f"{{%{before} {'endif' if end else 'if true'} {after}%}}"


@lru_cache(maxsize=16)
def compile_template(text: str) -> Any:
    """A compiled Jinja chat template, in Hugging Face's environment under a budget (cached per text)."""
    import jinja2  # here, not at import: only rendering needs Jinja
    from jinja2.ext import loopcontrols

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    # Hugging Face's strftime_now reads the time of each call; ChatText puts a spec's fixed clock in its place.
    environment = budgeted_environment({"tojson": tojson},
                                       {"raise_exception": raise_exception,
                                        "strftime_now": lambda format: datetime.now().strftime(format)},
                                       trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    try:
        return environment.from_string(_GENERATION_TAG.sub(_plain_block, text))
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"chat template does not compile: {exc}") from None


def chat_messages(messages: list[dict[str, Any]], controls: ControlTokens | None = None,
                  first: int = 0, *, blocks: bool = False) -> list[dict[str, Any]]:
    """v1 standard messages -> Hugging Face chat messages (text content, ``tool_calls``), with
    control-token strings in data text broken when ``controls`` is given. ``first`` is the number
    of the first message, which errors name. With ``blocks``, content is a list of blocks, as v1
    gives a processor's template (``_to_hf_messages(is_multimodal=True)``): ``{"type": "text",
    "text"}`` per text block, each escaped alone, and ``{"type": "image", "image": path}`` (video,
    audio) per media block, which the template writes its own placeholder for."""
    escape = controls.escape if controls is not None else (lambda text, where: text)
    chat = []
    for number, message in enumerate(messages, first):
        where = f"message {number}"
        pieces: list[str] = []  # text, with adjacent data blocks escaped as one run
        run: list[str] = []
        items: list[dict[str, Any]] = []  # with blocks: the content list
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in message.get("content") or []:
            kind, value = block.get("type"), block.get("value")
            if kind == "text":
                if blocks:
                    items.append({"type": "text", "text": escape(value or "", where)})
                else:
                    run.append(value or "")
            elif kind == "reasoning":
                reasoning.append(value or "")
            elif kind == "tool_call":
                calls.append(_tool_call(value, number, controls))
            elif kind in _MEDIA_TEXT:  # the placeholder is ours, not data: written unescaped
                if blocks:
                    medium = _MEDIA_TEXT[kind][1:-1]  # image, video, audio
                    items.append({"type": medium, medium: value})
                else:
                    pieces += [escape("".join(run), where), _MEDIA_TEXT[kind]]
                    run = []
            else:
                raise RenderError(f"{where}: content block type {shown(kind)} cannot be rendered as text",
                                  cause="format")
        role = message.get("role")
        # The template writes the role between its turn markers: any other role forges turns.
        if not (isinstance(role, str) and role in ROLES):
            raise RenderError(f"{where}: role {shown(role)} is not one of {', '.join(ROLES)}", cause="role")
        converted: dict[str, Any] = {"role": role, "content": items if blocks else
                                     "".join([*pieces, escape("".join(run), where)])}
        if calls:
            converted["tool_calls"] = calls
        if reasoning_text := "".join(reasoning):  # v1's keys, in v1's order, then what transformers adds
            converted = with_reasoning(converted, escape(reasoning_text, where))
        chat.append(converted)
    return chat


def with_reasoning(message: dict[str, Any], reasoning: str) -> dict[str, Any]:
    """``message`` with its reasoning under every name templates read, as transformers'
    ``apply_chat_template`` passes it (``_alias_reasoning_fields``): ``reasoning_content`` (Qwen3,
    DeepSeek-R1, the built-ins) and ``thinking`` (gpt-oss), which comes first."""
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def _tool_call(value: Any, number: int, controls: ControlTokens | None) -> dict[str, Any]:
    """A ``tool_call`` block as v1 passes it on: name and arguments as the data holds them (a
    string stays a string; templates write it verbatim), every string in them escaped."""
    try:
        call = json.loads(value)
        name, arguments = call["name"], call.get("arguments", {})
    except RecursionError:
        raise RenderError(f"message {number}: tool call is JSON nested too deep to read", cause="nested") from None
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
        raise RenderError(f"message {number}: tool call is not {{\"name\": ..., \"arguments\": ...}} JSON "
                          f"({bounded(str(exc), 200)})", cause="tool_call") from None
    if controls is not None:
        name, arguments = controls.escape_json([name, arguments], f"message {number} tool call")
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def sample_tools(sample: Mapping[str, Any], controls: ControlTokens | None = None) -> list[dict[str, Any]] | None:
    """The sample's tool schemas as v1 passes them: None when it has none (missing or empty), else
    its JSON as a list, ``"[]"`` as ``[]`` (which Llama 3.1 and Mistral Nemo render as a tools
    preamble), one schema wrapped in a list; every string in them escaped when ``controls`` is
    given (the schemas are data too). A schema that is not a JSON object is refused, as
    ``apply_chat_template`` refuses it."""
    tools = sample.get("tools")
    if not tools:
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except RecursionError:
            raise RenderError("tools is JSON nested too deep to read", cause="nested") from None
        except json.JSONDecodeError as exc:
            raise RenderError(f"tools is not valid JSON ({exc})", cause="tools") from None
    if not isinstance(tools, list):
        tools = [tools]
    for number, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise RenderError(f"tools item {number} is {type(tool).__name__} JSON, not a tool schema (a JSON object)",
                              cause="tools")
    if controls is not None:
        tools = controls.escape_json(tools, "tools")
    return tools


def message_weight(message: dict[str, Any]) -> float:
    """A message's loss weight; missing means 1 for assistant messages and 0 for the rest (v1)."""
    weight = message.get("loss_weight")
    if weight is None:
        return 1.0 if message.get("role") == "assistant" else 0.0
    return float(weight)


def reads_clock(template_text: str) -> bool:
    """Whether a template can read the time (Llama 3.x writes "Today Date" with ``strftime_now``).
    Jinja has no lookup of a global by a computed name, so a template that never spells the name
    cannot call it."""
    return "strftime_now" in template_text


def fixed_clock(clock: str | None) -> str:
    """The time a clock-reading template is rendered at, as ISO 8601 seconds: ``clock`` checked
    (a date or a date and time), or now when none is given."""
    if clock is None:
        return datetime.now().replace(microsecond=0).isoformat()
    try:
        return datetime.fromisoformat(clock).replace(tzinfo=None).isoformat()
    except (TypeError, ValueError):
        raise RenderError(f"clock {shown(clock)} is not a date (YYYY-MM-DD) or a date and time "
                          "(YYYY-MM-DDTHH:MM:SS)") from None


class ChatText:
    """One template: the text of a conversation, and where its messages lie in that text.

    A template that reads the clock reads ``clock`` (ISO 8601), fixed for the life of this object
    (now, when none is given), never the time of each call: a spec's texts must not change with
    the day they are rendered on.
    """

    def __init__(self, template_text: str, special_tokens: dict[str, str], clock: str | None = None, *,
                 seconds: float | None = None, characters: int = TEMPLATE_CHARACTERS) -> None:
        import jinja2  # here, not at import: only rendering needs Jinja

        self.template_text = template_text
        self.special_tokens = dict(special_tokens)
        # The budget of an entry's texts (see .sandbox); the module's seconds are read now, not at import.
        self.seconds, self.characters = seconds if seconds is not None else sandbox.TEMPLATE_SECONDS, characters
        self._deadline: float | None = None
        self.template = compile_template(template_text)
        # What Template.render builds for every call, built once: a render is then a context
        # over one dict (a quarter less time per render).
        self._variables = {**self.template.globals, **self.special_tokens, "documents": None}
        self.clock = fixed_clock(clock) if reads_clock(template_text) else None
        if self.clock is not None:
            self._variables["strftime_now"] = datetime.fromisoformat(self.clock).strftime
        self._errors = jinja2.TemplateError
        self._fast = FAST_TEMPLATES.get(template_text)
        self._bos = self.special_tokens.get("bos_token")

    def __getstate__(self) -> tuple[Any, ...]:  # a compiled template does not pickle (spawned workers)
        return self.template_text, self.special_tokens, self.clock, self.seconds, self.characters

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        text, special, clock, seconds, characters = state
        self.__init__(text, special, clock, seconds=seconds, characters=characters)

    @contextmanager
    def entry(self) -> Iterator[None]:
        """One entry's texts: inside, they share ``seconds`` from now (outside, each has its own)."""
        self._deadline = time.monotonic() + self.seconds
        try:
            yield
        finally:
            self._deadline = None

    def text(self, chat: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool,
             **options: Any) -> str:
        """The template's text; ``options`` are extra template variables (``enable_thinking``).
        Whatever the template raises on this conversation (its ``raise_exception``, a division by
        zero, recursion in a macro or in JSON) is a RenderError: one entry's ``render_error``."""
        try:
            if self._fast is not None:  # a built-in's Python renderer: the same text (tests/test_render_fast.py)
                return self._fast(chat, tools, generation_prompt, self._bos)
            variables = {**self._variables, "messages": chat, "tools": tools,
                         "add_generation_prompt": generation_prompt, **options}
            start(self.seconds, self.characters, self._deadline)
            return written(self.template.root_render_func(self.template.new_context(variables, shared=True)))
        except RenderError:
            raise
        except self._errors as exc:
            raise RenderError(f"chat template failed: {bounded(str(exc), 200)}",
                              cause=template_cause(exc, chat, tools)) from None
        except Exception as exc:  # a template is code from the user: any error is the entry's
            cause = template_cause(exc, chat, tools)
            wanted = f" ({describe_cause(cause).words})" if cause == "string_arguments" else ""
            raise RenderError(f"chat template failed: {type(exc).__name__}: {bounded(str(exc), 200)}{wanted}",
                              cause=cause) from None

    def spans(self, chat: list[dict[str, Any]], weights: list[float], tools: list[dict[str, Any]] | None, *,
              full: str, wanted: list[int], **options: Any) -> list[SupervisedChars]:
        """Character spans of the ``wanted`` messages in ``full``, found by rendering prefixes.

        Message ``i`` spans from the end of ``chat[:i]`` (with the generation prompt before an
        assistant message) to the end of ``chat[:i + 1]``: its text, its end-of-turn token and
        whatever the template writes after it, as v1's diff supervises. Messages whose weight is
        not above v1's epsilon are left out.
        """
        spans = []
        for i in wanted:
            if weights[i] <= SUPERVISED_EPSILON:
                continue
            before = self.text(chat[:i], tools, chat[i]["role"] == "assistant", **options)
            through = full if i == len(chat) - 1 else self.text(chat[: i + 1], tools, False, **options)
            if not through.startswith(before):  # why, in the template's own text
                plain = self.text(chat[:i], tools, False, **options) if chat[i]["role"] == "assistant" else before
                cause, why = prefix_cause(before, plain, through)
                raise RenderError(f"message {i}: {why}, so the message cannot be located in the text", cause=cause)
            if not full.startswith(through):
                cause, why = prefix_cause(through, through, full)
                raise RenderError(f"message {i}: {why}, so the message cannot be located in the text", cause=cause)
            if len(through) > len(before):
                spans.append(SupervisedChars(len(before), len(through), weights[i]))
        return spans

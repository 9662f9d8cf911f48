"""Render a standard sample to chat text and find, by characters, what each entry supervises.

The Jinja environment is the one Hugging Face's ``apply_chat_template`` uses (sandboxed,
``trim_blocks``/``lstrip_blocks``, ``loopcontrols``, its ``tojson``, ``raise_exception`` and
``strftime_now``; ``{% generation %}``), so the text is identical. A template with one
``{% generation %}`` block per assistant message says itself what each supervises: one render
gives the text and the spans. Otherwise where a message sits in the text is found by rendering
prefixes of the conversation: message ``i`` of an assistant spans from the end of
``messages[:i]`` with the generation prompt to the end of ``messages[:i + 1]``. This works for any template that renders a conversation as the rendering of
its prefixes, which is what chat models are trained to continue; a template that is not is
reported, never guessed at.
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..convert import SUPERVISED_EPSILON
from ..errors import RenderError

#: Placeholder text for media blocks, as LLaMA-Factory's text templates write them.
_MEDIA_TEXT = {"image_url": "<image>", "image": "<image>", "video_url": "<video>", "video": "<video>",
               "audio_url": "<audio>", "audio": "<audio>"}


@dataclass(frozen=True)
class Span:
    """Characters ``start:end`` of the text are supervised with ``weight``."""

    start: int
    end: int
    weight: float


_TRACKING: ContextVar[tuple[list[str], list[tuple[int, int]]] | None] = ContextVar("generation", default=None)
_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


@lru_cache(maxsize=16)
def compile_template(text: str) -> Any:
    """A compiled Jinja chat template, in Hugging Face's environment (cached per text)."""
    import jinja2  # here, not at import: only rendering needs Jinja
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}`` renders its body and, while tracking, records
        where it lies in the text (as Hugging Face's AssistantTracker does)."""

        tags = {"generation"}

        def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            body = caller()
            tracking = _TRACKING.get()
            if tracking is not None:  # the text so far has been yielded into ``pieces``
                pieces, spans = tracking
                start = sum(map(len, pieces))
                spans.append((start, start + len(body)))
            return body

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    try:
        return environment.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"chat template does not compile: {exc}") from None


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v1 standard messages -> Hugging Face chat messages (text content, ``tool_calls``)."""
    chat = []
    for number, message in enumerate(messages):
        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in message.get("content") or []:
            kind, value = block.get("type"), block.get("value")
            if kind == "text":
                texts.append(value or "")
            elif kind == "reasoning":
                reasoning.append(value or "")
            elif kind == "tool_call":
                calls.append(_tool_call(value, number))
            elif kind in _MEDIA_TEXT:
                texts.append(_MEDIA_TEXT[kind])
            else:
                raise RenderError(f"message {number}: content block type '{kind}' cannot be rendered as text")
        converted: dict[str, Any] = {"role": message.get("role"), "content": "".join(texts)}
        if reasoning:  # the field chat templates read (Qwen3, DeepSeek-R1, the built-ins)
            converted["reasoning_content"] = "".join(reasoning)
        if calls:
            converted["tool_calls"] = calls
        chat.append(converted)
    return chat


def _tool_call(value: Any, number: int) -> dict[str, Any]:
    try:
        call = json.loads(value)
        name, arguments = call["name"], call.get("arguments", {})
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise RenderError(f"message {number}: tool call is not {{\"name\": ..., \"arguments\": ...}} JSON ({exc})") from None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass  # kept as the string the data holds
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def sample_tools(sample: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The sample's tool schemas as a list (v1 stores them as a JSON string), or None."""
    tools = sample.get("tools")
    if tools is None or tools == "":
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise RenderError(f"tools is not valid JSON ({exc})") from None
    if isinstance(tools, dict):
        tools = [tools]
    return tools or None


def message_weight(message: dict[str, Any]) -> float:
    """A message's loss weight; missing means 1 for assistant messages and 0 for the rest (v1)."""
    weight = message.get("loss_weight")
    if weight is None:
        return 1.0 if message.get("role") == "assistant" else 0.0
    return float(weight)


class ChatText:
    """One template's renderer: ``render(messages, cut) -> (text, supervised spans)``."""

    def __init__(self, template_text: str, special_tokens: dict[str, str]) -> None:
        self.template_text = template_text
        self.special_tokens = dict(special_tokens)
        self.has_generation = bool(_GENERATION_TAG.search(template_text))

    def tracked_text(self, chat: list[dict[str, Any]], tools: list[dict[str, Any]] | None
                     ) -> tuple[str, list[tuple[int, int]]]:
        """The full text in one render, with the character span of every generation block."""
        import jinja2  # here, not at import: only rendering needs Jinja

        pieces: list[str] = []
        spans: list[tuple[int, int]] = []
        token = _TRACKING.set((pieces, spans))
        try:
            for piece in compile_template(self.template_text).generate(
                messages=chat, tools=tools, add_generation_prompt=False, **self.special_tokens
            ):
                pieces.append(piece)
        except jinja2.TemplateError as exc:
            raise RenderError(f"chat template failed: {exc}") from None
        finally:
            _TRACKING.reset(token)
        return "".join(pieces), spans

    def text(self, chat: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool) -> str:
        import jinja2  # here, not at import: only rendering needs Jinja

        try:
            return compile_template(self.template_text).render(
                messages=chat, tools=tools, add_generation_prompt=generation_prompt, **self.special_tokens
            )
        except jinja2.TemplateError as exc:
            raise RenderError(f"chat template failed: {exc}") from None

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, has_cut: bool
               ) -> tuple[str, list[Span]]:
        """The text of ``messages`` and the spans to supervise.

        With a cut only the last message is supervised (the entry trains that turn); without
        one, every message with a loss weight above v1's epsilon.
        """
        chat = chat_messages(messages)
        if has_cut:
            wanted = [len(messages) - 1] if messages else []
        else:
            wanted = [i for i, m in enumerate(messages) if message_weight(m) > SUPERVISED_EPSILON]
        if self.has_generation:
            full, blocks = self.tracked_text(chat, tools)
            assistants = [i for i, message in enumerate(chat) if message["role"] == "assistant"]
            # One block per assistant message, in order: the template says what each supervises.
            if len(blocks) == len(assistants) and all(chat[i]["role"] == "assistant" for i in wanted):
                by_message = dict(zip(assistants, blocks))
                return full, [Span(*by_message[i], message_weight(messages[i])) for i in wanted
                              if message_weight(messages[i]) > SUPERVISED_EPSILON and by_message[i][1] > by_message[i][0]]
        else:
            full = self.text(chat, tools, generation_prompt=False)
        return full, self._prefix_spans(chat, messages, tools, full, wanted)

    def _prefix_spans(self, chat: list[dict[str, Any]], messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None, full: str, wanted: list[int]) -> list[Span]:
        """Spans found by rendering prefixes, for any template that renders prefixes stably."""
        spans = []
        for i in wanted:
            weight = message_weight(messages[i])
            if weight <= SUPERVISED_EPSILON:
                continue
            before = self.text(chat[:i], tools, generation_prompt=chat[i]["role"] == "assistant")
            through = full if i == len(chat) - 1 else self.text(chat[: i + 1], tools, generation_prompt=False)
            if not (through.startswith(before) and full.startswith(through)):
                raise RenderError(
                    f"message {i}: the template does not render the conversation as its prefixes do, "
                    "so the message cannot be located in the text"
                )
            # Whitespace after the end-of-turn token is layout, not something the model says.
            end = len(through.rstrip())
            if end > len(before):
                spans.append(Span(len(before), end, weight))
        return spans

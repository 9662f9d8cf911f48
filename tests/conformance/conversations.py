"""Hand-written conversations in v1's standard format, for the things demo data rarely has:
reasoning, tool chains (with and without tools, with an empty tools list), empty turns, unicode,
control strings in data text, thinking switches and inline ``<think>``. Ours, made for these tests."""

from __future__ import annotations

import json
from typing import Any

TOOLS = json.dumps([{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])


def _message(role: str, *blocks: tuple[str, str], weight: float | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": kind, "value": value} for kind, value in blocks]}
    message["loss_weight"] = weight if weight is not None else (1.0 if role == "assistant" else 0.0)
    return message


def user(text: str) -> dict[str, Any]:
    return _message("user", ("text", text))


def system(text: str) -> dict[str, Any]:
    return _message("system", ("text", text))


def answer(text: str, reasoning: str | None = None, weight: float | None = None) -> dict[str, Any]:
    blocks = ([("reasoning", reasoning)] if reasoning is not None else []) + [("text", text)]
    return _message("assistant", *blocks, weight=weight)


def call(name: str, arguments: Any, text: str = "", reasoning: str | None = None) -> dict[str, Any]:
    blocks = ([("reasoning", reasoning)] if reasoning is not None else []) + ([("text", text)] if text else [])
    return _message("assistant", *blocks, ("tool_call", json.dumps({"name": name, "arguments": arguments})))


def tool(text: str) -> dict[str, Any]:
    return _message("tool", ("text", text))


def conversations() -> list[dict[str, Any]]:
    """The rows, each a v1 sample (``messages``, and ``tools`` as a JSON string where it has them)."""
    weather = [user("What is the weather in Paris?"), call("get_weather", {"city": "Paris"}),
               tool('{"city": "Paris", "sky": "sunny", "celsius": 21}'), answer("It is sunny in Paris, 21 °C.")]
    rows: list[dict[str, Any]] = [
        {"messages": [user("Hello!"), answer("Hi, how can I help?")]},
        {"messages": [system("You are terse."), user("Name a prime."), answer("7."), user("Another?"), answer("11.")]},
        {"messages": [user("Is 91 prime?"), answer("No: 91 = 7 × 13.", reasoning="Try 7: 7 × 13 = 91.")]},
        {"messages": [user("2 + 2?"), answer("4.", reasoning="Add."), user("Times 3?"),
                      answer("12.", reasoning="4 × 3 = 12.")]},
        {"messages": [user("Why is the sky blue? /think"),
                      answer("Rayleigh scattering.", reasoning="Short waves scatter.")]},
        {"messages": [user("Say yes. /no_think"), answer("Yes.")]},
        {"messages": [user("Say no. /no_think"), answer("No.", reasoning="The user wants no.")]},
        {"messages": [user("Think aloud."), answer("<think>\nhmm\n</think>\n\nDone.")]},
        {"messages": [user("Unclosed?"), answer("<think>I never close this")]},
        {"messages": [user("Only think."), answer("", reasoning="Nothing to say after this.")]},
        {"messages": weather, "tools": TOOLS},
        {"messages": weather, "tools": "[]"},
        {"messages": weather},
        {"messages": [user("Weather in Oslo and Rome?"), call("get_weather", {"city": "Oslo"}, text="Checking both."),
                      tool('{"sky": "snow"}'), call("get_weather", '{"city": "Rome"}'), tool('{"sky": "clear"}'),
                      answer("Snow in Oslo, clear in Rome.")], "tools": TOOLS},
        {"messages": [user("Weather?"), call("get_weather", {"city": "Lima"}, reasoning="I need the tool."),
                      tool('{"sky": "fog"}'), answer("Foggy.", reasoning="The tool said fog.")], "tools": TOOLS},
        {"messages": [system("Use tools."), user("Hi"), answer("Hello.")], "tools": "[]"},
        {"messages": [user(""), answer("You sent nothing.")]},
        {"messages": [user("Reply with nothing."), answer("")]},
        {"messages": [user("你好，世界！"), answer("你好！有什么可以帮你？")]},
        {"messages": [user("Emoji 🎉🧪 and RTL שלום and e\u0301"), answer("👍 שלום é")]},
        {"messages": [user("Close it: <|im_end|><|eot_id|><end_of_turn></s>"),
                      answer("I will not: <|im_start|>system <start_of_turn>model <|end|>")]},
        {"messages": [user("Tags <tool_call>{}</tool_call> and <think>x</think>"), answer("Seen: <tool_call>.")]},
        {"messages": [user("A"), answer("B", weight=0.0), user("C"), answer("D", weight=0.5)]},
        {"messages": [user("Trailing spaces  "), answer("  padded answer  ")]},
        {"messages": [user("line one\n\nline two\n"), answer("\nstarts with a newline\n")]},
        {"messages": [system("First."), system("Second system."), user("Two systems?"), answer("Yes.")]},
        {"messages": [user("Where?"), answer("Here."), system("Late system."), user("Now?"), answer("Now.")]},
        {"messages": [answer("I speak first."), user("Then me."), answer("Then me again.")]},
    ]
    return rows

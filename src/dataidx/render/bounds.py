"""The least number of tokens an entry can have, known before its chat text is written: what lets a
render refuse a conversation past its bound at a cost that does not grow with the conversation.

Two facts give a lower bound. No token stands for more characters than the tokenizer's longest
token has, so a text's tokens are at least its characters over that length. And the template
writes a turn's markers for every message: control tokens (``<|im_start|>``, ``<|im_end|>``),
one token each whatever surrounds them, since data text cannot hold them (:mod:`.escape`), and
stretches of other text between them (``user\\n``, the newline after ``<|im_end|>``), one token
at least each. A message's text alone does not count them, which is how 4,000 one-character
turns (8,000 characters, some 56k tokens under ChatML) stayed under a bound of 8,192 tokens.

The markers a message adds are measured, not assumed: the template renders probe conversations
(each role first and after every role, empty and one-character content, with and without
tools) and the tokenizer counts them. A message of a role is then taken to add at least the
fewest markers any probe saw it add. That holds for every template whose markers depend on a
message's role and place, not on its words: the built-ins (their markers are literal strings),
and the templates of real models (which write a turn header whatever it holds; Qwen3 writes
one ``<|im_start|>user`` for a run of tool results, so a tool message after a tool adds fewer:
the probes after each role see that). A template that adds fewer markers than any probe saw
would get a ``too_long`` it might not deserve; one that loses markers as a conversation grows
(a probe sees a message take some away) gets no markers counted at all, only characters.
A place the template refuses (ChatML's system message after the first) counts as costly as the
cheapest accepted one: such an entry ends in a ``render_error`` anyway, so no entry that fits
the cutoff is refused for it. Characters are counted as the character bound always counted
them, every text block as written: a template that leaves one out (Llama 2 writes a system
message inside the first user turn, so a system message alone writes nothing) is the one case
where that count can exceed what the template writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..convert import ROLES
from ..errors import RenderError
from .shared_prefix import encode_each

#: The message lists of a standard sample; a preference entry's two sides both count.
MESSAGE_LISTS = ("messages", "chosen_messages", "rejected_messages")
#: Conversations a probe message follows: none (it comes first), one of each role, and the
#: places where templates write differently (a system turn's first reply, a second exchange).
_PROBE_PREFIXES: list[tuple[tuple[str, str], ...]] = [
    (), *(((role, "x"),) for role in ROLES), (("system", "x"), ("user", "x")), (("user", "x"), ("assistant", "x")),
    (("system", "x"), ("user", "x"), ("assistant", "x")),
]
_PROBE_TOOLS = [{"type": "function", "function": {"name": "f", "description": "d",
                                                   "parameters": {"type": "object", "properties": {}}}}]


@dataclass(frozen=True)
class Floor:
    """What one message adds to its conversation's tokens at the least."""

    markers: int = 0  # control tokens
    runs: int = 0  # stretches of other tokens between them, a token at least each

    @property
    def tokens(self) -> int:
        return self.markers + self.runs


@dataclass(slots=True, kw_only=True)
class Least:
    """Lower bounds on one entry's tokens, and what they come from (for its ``detail``)."""

    messages: int
    markers: int
    runs: int
    characters: int | None = None  # None: known from the message count alone, before fetching
    longest: int = 1

    @property
    def tokens(self) -> int:
        # Markers and other tokens are apart: the data's characters lie in the other tokens only.
        return self.markers + max(self.runs, -(-(self.characters or 0) // self.longest))

    def __str__(self) -> str:
        markers = f"{self.markers + self.runs} tokens of turn markers at least"
        if self.characters is None:
            return f"{self.messages} messages ({markers})"
        return f"{self.messages} messages ({markers}) and {self.characters} characters of message text"


class TurnFloors:
    """Per role, the tokens a message adds at the least, first in its conversation and later.

    Example::

        floors = TurnFloors.probe(chat_text, backend, control_ids)
        floors.least(sample, longest).tokens    # a lower bound on the entry's tokens
        floors.cuts(row_sample, longest)[4]      # the same for messages[:4], in constant time
    """

    def __init__(self, first: dict[str, Floor], later: dict[str, Floor]) -> None:
        self.first, self.later = first, later
        # A role the template refused in every probe of a place costs what the cheapest role does.
        self.first_least = _cheapest(first.values())
        self.later_least = _cheapest(later.values())
        # Keyed by role, looked up with whatever a message holds there (None, or a value the
        # renderer refuses later): hence object keys.
        self._first: dict[object, tuple[int, int]] = {role: (floor.markers, floor.runs)
                                                      for role, floor in first.items()}
        self._later: dict[object, tuple[int, int]] = {role: (floor.markers, floor.runs)
                                                      for role, floor in later.items()}
        self._first_default = (self.first_least.markers, self.first_least.runs)
        self._later_default = (self.later_least.markers, self.later_least.runs)

    @classmethod
    def probe(cls, chat: Any, backend: Any, control_ids: Iterable[int]) -> TurnFloors:
        """Measure a template's markers with its tokenizer (``chat`` a :class:`.chat_text.ChatText`;
        ``control_ids`` the added tokens data text cannot hold)."""
        controls = frozenset(control_ids)
        pairs = [(before, (*before, (role, content)), tools) for tools in (False, True) for before in _PROBE_PREFIXES
                 for role in ROLES for content in ("", "x")]
        texts: dict[tuple[tuple[tuple[str, str], ...], bool], str] = {}
        for before, after, tools in pairs:
            for conversation in (before, after):
                if (conversation, tools) not in texts:
                    try:
                        texts[conversation, tools] = chat.text([{"role": role, "content": content}
                                                                for role, content in conversation],
                                                               _PROBE_TOOLS if tools else None, False)
                    except RenderError:  # a place the template refuses: it constrains nothing
                        pass
        keys = list(texts)
        encoded = encode_each(backend, [texts[key] for key in keys])  # a probe the tokenizer fails on counts nothing
        counted = {key: _markers_and_runs(encoding.ids, controls) for key, encoding in zip(keys, encoded)
                   if getattr(encoding, "failed", None) is None}
        seen: dict[tuple[bool, str], Floor] = {}
        for before, after, tools in pairs:
            if (before, tools) not in counted or (after, tools) not in counted:
                continue
            (markers_before, runs_before), (markers_after, runs_after) = counted[before, tools], counted[after, tools]
            markers, runs = markers_after - markers_before, runs_after - runs_before
            if markers < 0 or runs < 0:  # the template loses markers as a conversation grows: count none
                return cls({}, {})
            place = (not before, after[-1][0])
            found = seen.get(place)
            seen[place] = Floor(markers, runs) if found is None else \
                Floor(min(found.markers, markers), min(found.runs, runs))
        return cls({role: floor for (first, role), floor in seen.items() if first},
                   {role: floor for (first, role), floor in seen.items() if not first})

    def least_of_count(self, *counts: int) -> Least:
        """What message lists of ``counts`` messages take at the least, whatever their roles and
        words: a cut is its entry's message count, so this needs no fetch."""
        lists = [count for count in counts if count > 0]
        later = sum(lists) - len(lists)
        return Least(messages=sum(lists),
                     markers=len(lists) * self.first_least.markers + later * self.later_least.markers,
                     runs=len(lists) * self.first_least.runs + later * self.later_least.runs)

    def count_past(self, bound: int) -> float:
        """The fewest messages whose :meth:`least_of_count` is past ``bound`` (``inf``: none):
        a cut of at least this many is over by its count alone, told by one comparison."""
        first, later = self.first_least.tokens, self.later_least.tokens
        if first > bound:
            return 1
        return float("inf") if later == 0 else (bound - first) // later + 2

    def least(self, sample: Mapping[str, Any], longest: int) -> Least:
        """The lower bound of a sample's tokens: its markers and the characters of its text."""
        messages = markers = runs = characters = 0
        for key in MESSAGE_LISTS:
            for message_markers, message_runs, message_characters in self.costs(sample.get(key) or ()):
                messages, markers, runs = messages + 1, markers + message_markers, runs + message_runs
                characters += message_characters
        return Least(messages=messages, markers=markers, runs=runs, characters=characters, longest=longest)

    def costs(self, messages: Iterable[dict[str, Any]]) -> Iterator[tuple[int, int, int]]:
        """``(markers, runs, text characters)`` of each message of one list, in order. Run for
        every rendered entry, so written for speed: a dict lookup and a loop over the blocks."""
        table, default = self._first, self._first_default
        for message in messages:
            try:
                markers, runs = table.get(message.get("role"), default)
            except TypeError:  # an unhashable role: the renderer refuses it later, in words
                markers, runs = default
            table, default = self._later, self._later_default
            characters = 0
            for block in message.get("content") or ():
                if block.get("type") == "text":
                    value = block.get("value")
                    characters += len(value) if isinstance(value, str) else 0
            yield markers, runs, characters

    def cuts(self, sample: Mapping[str, Any], longest: int) -> CutLeast:
        """The bounds of every cut of a sample's ``messages`` at once: one pass over the row,
        then each cut in constant time."""
        return CutLeast(self, sample, longest)


class CutLeast:
    """Lower bounds of ``messages[:cut]`` for every cut of one converted row: equal to
    ``floors.least(truncate(sample, cut), longest)``, from prefix sums."""

    def __init__(self, floors: TurnFloors, sample: Mapping[str, Any], longest: int) -> None:
        self.longest = longest
        self.markers, self.runs, self.characters = [0], [0], [0]
        markers = runs = characters = 0
        for message_markers, message_runs, message_characters in floors.costs(sample.get("messages") or ()):
            markers, runs, characters = markers + message_markers, runs + message_runs, characters + message_characters
            self.markers.append(markers)
            self.runs.append(runs)
            self.characters.append(characters)
        self.rest = (0, 0, 0, 0)
        if any(sample.get(key) for key in MESSAGE_LISTS[1:]):  # none in a row with cuts, but a crafted one may
            rest = floors.least({key: sample.get(key) for key in MESSAGE_LISTS[1:]}, longest)
            self.rest = (rest.messages, rest.markers, rest.runs, rest.characters or 0)

    def __getitem__(self, cut: int) -> Least:
        cut = max(0, min(cut, len(self.markers) - 1))
        messages, markers, runs, characters = self.rest
        return Least(messages=cut + messages, markers=self.markers[cut] + markers, runs=self.runs[cut] + runs,
                     characters=self.characters[cut] + characters, longest=self.longest)


def _markers_and_runs(ids: list[int], controls: frozenset[int]) -> tuple[int, int]:
    markers = runs = 0
    in_run = False
    for token in ids:
        if token in controls:
            markers, in_run = markers + 1, False
        elif not in_run:
            runs, in_run = runs + 1, True
    return markers, runs


def _cheapest(floors: Iterable[Floor]) -> Floor:
    found = list(floors)
    if not found:
        return Floor()
    return Floor(min(floor.markers for floor in found), min(floor.runs for floor in found))


@dataclass(frozen=True)
class Extends:
    """A lower bound from a tokenized text this one extends: ``tokens`` is that text's count."""

    cut: int
    tokens: int

    def __str__(self) -> str:
        return f"its chat text extends that of cut {self.cut}, which has {self.tokens} tokens"


class Boundaries:
    """Where a tokenizer must split a text: before an added token that starts there.

    The tokenizer finds added tokens first and tokenizes the text between them piece by piece,
    so if ``text`` starts with ``known`` and a split falls at ``len(known)``, the tokens of
    ``text`` are those of ``known`` and then more: at least as many, whatever the template.
    A later cut's chat text extends an earlier cut's wherever the template writes turns in
    order, so once one cut of a row is counted past the bound the rest are known to be.
    """

    def __init__(self, added_tokens: dict[int, Any]) -> None:
        found = [token for token in added_tokens.values() if getattr(token, "content", "")]
        self.strings = sorted({token.content for token in found})
        # A split is certain only before a token matched as written, that takes no space before it.
        self.starts = tuple(sorted({token.content for token in found if not (
            token.lstrip or token.single_word or token.normalized)}))
        self.longest = max(map(len, self.strings), default=0)

    def extends(self, text: str, known: str) -> bool:
        """Whether ``text`` has at least the tokens of ``known``: it starts with it and the
        tokenizer splits it there (an added token starts there and none spans the place)."""
        at = len(known)
        if len(text) <= at or not text.startswith(known) or not text.startswith(self.starts, at):
            return False
        return not any(text.startswith(string, start) for start in range(max(0, at - self.longest + 1), at)
                       for string in self.strings if start + len(string) > at)

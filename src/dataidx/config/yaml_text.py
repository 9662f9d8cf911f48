"""YAML text -> plain data, refusing what ``yaml.safe_load`` lets through at a cost.

``safe_load`` runs no code, but a 500-byte file of nested aliases expands to billions of values
once anything walks it (printing one in an error message, say), a key given twice is silently
last-wins (two datasets of one name become one), and very deep nesting exhausts the stack. Here
each is one error naming the line, and :func:`shown` prints a value bounded, never expanded.

The text is read as events first (libyaml's parser where PyYAML has it), which costs a second
for a 100,000-dataset config: depth and what the aliases expand to are measured there, before a
node is made. Only a document that passes is composed and constructed, with the collector
paused (its nodes are acyclic: collecting them cost 8 of the 10 s a large config took).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from ..errors import shown
from ..sources import paused_gc

#: Values (scalars, lists, mappings) the aliases of a config may expand to, above what it writes:
#: past this, the expansion may cost at most :data:`AMPLIFICATION` times the text's own values.
MAX_VALUES = 100_000
#: How many times the values it writes a config's aliases may stand for, past :data:`MAX_VALUES`:
#: walking the data then costs in proportion to the text, however it nests its aliases (merge keys
#: shared by every dataset stand for a few times what they write; an alias bomb, millions).
AMPLIFICATION = 10
#: How deep lists and mappings may nest, aliases expanded.
MAX_DEPTH = 64

#: The tag of a merge key (``<<``).
_MERGE = "tag:yaml.org,2002:merge"
#: libyaml's parser and composer where PyYAML was built with it: 15 times faster.
_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlProblem(Exception):
    """What is wrong with a YAML text, already worded for the user."""


class _Loader(_BASE):  # type: ignore[valid-type, misc]
    """The safe loader that refuses a mapping key given twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *defaults`: keys the mapping's own override, as YAML means
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise YamlProblem(f"line {line}: key {shown(key)} is given again (first on line {seen[key]}); "
                                  "a later value would silently replace the first")
            if isinstance(key, (str, int, float, bool)):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _measure(text: str) -> None:
    """Refuse, from the events alone, nesting deeper than :data:`MAX_DEPTH` (aliases expanded),
    an alias inside the value it names (a document that holds itself), and aliases that expand
    past :data:`MAX_VALUES` and :data:`AMPLIFICATION` times the values written."""
    anchored: dict[str, tuple[int, int]] = {}  # anchor -> (values, height) of its value, once closed
    open_ = [[None, 0, 0]]  # per open collection: [anchor, values, height of its deepest child]
    written = expanded = 0
    for event in _events(text):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchored:
                if any(frame[0] == event.anchor for frame in open_):
                    raise YamlProblem(f"line {line}: alias *{event.anchor} stands for a value it is inside; "
                                      "a config cannot hold itself")
                continue  # an undefined alias: the composer names it
            values, height = anchored[event.anchor]
            if len(open_) - 1 + height > MAX_DEPTH:
                raise YamlProblem(f"line {line}: nested deeper than {MAX_DEPTH} levels once its aliases are expanded")
            expanded += values
            if expanded > MAX_VALUES and expanded > AMPLIFICATION * written:
                raise YamlProblem(f"line {line}: its aliases expand to over {expanded:,} values from the {written:,} "
                                  f"it writes (more than {MAX_VALUES:,}, and {AMPLIFICATION} times what is written); "
                                  "a dataset config needs a few dozen")
        elif isinstance(event, yaml.CollectionStartEvent):
            written += 1
            expanded += 1
            if len(open_) > MAX_DEPTH:
                raise YamlProblem(f"line {line}: nested deeper than {MAX_DEPTH} levels")
            open_.append([event.anchor, 1, 0])
            continue
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, values, below = open_.pop()
            height = below + 1
            if anchor is not None:
                anchored[anchor] = (values, height)
        elif isinstance(event, yaml.ScalarEvent):
            written += 1
            expanded += 1
            values = height = 1
            if event.anchor is not None:
                anchored[event.anchor] = (1, 1)
        else:
            continue  # stream and document events
        parent = open_[-1]
        parent[1] += values
        parent[2] = max(parent[2], height)


def _events(text: str) -> Iterator[yaml.Event]:
    """The text's events; libyaml's scanner looks ahead through nested brackets and stops at its
    own limit (1,000 levels) before the events reach ours: the same refusal, in the same words."""
    try:
        yield from yaml.parse(text, Loader=_BASE)
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" not in str(exc.problem) or exc.problem_mark is None:
            raise
        raise YamlProblem(f"line {exc.problem_mark.line + 1}: nested deeper than {MAX_DEPTH} levels") from None


def parse_yaml(text: str) -> Any:
    """The data of a YAML text, or a YamlProblem (or ``yaml.YAMLError``) saying what is wrong."""
    _measure(text)
    loader = _Loader(text)
    try:
        with paused_gc():
            return loader.get_single_data()
    finally:
        loader.dispose()

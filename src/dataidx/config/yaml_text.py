"""YAML text -> plain data, refusing what ``yaml.safe_load`` lets through at a cost.

``safe_load`` runs no code, but a 500-byte file of nested aliases expands to billions of values
once anything walks it (printing one in an error message, say), a key given twice is silently
last-wins (two datasets of one name become one), and very deep nesting exhausts the stack. Here
each is one error naming the line, and :func:`shown` prints a value bounded, never expanded.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import shown

#: Values (scalars, lists, mappings) a config may hold once its aliases are expanded.
MAX_VALUES = 100_000
#: How deep lists and mappings may nest.
MAX_DEPTH = 64


class YamlProblem(Exception):
    """What is wrong with a YAML text, already worded for the user."""


class _Loader(yaml.SafeLoader):
    """``SafeLoader`` that refuses deep nesting and a mapping key given twice."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise YamlProblem(f"line {self.peek_event().start_mark.line + 1}: "
                                  f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise YamlProblem(f"line {line}: key {shown(key)} is given again (first on line {seen[key]}); "
                                  "a later value would silently replace the first")
            if isinstance(key, (str, int, float, bool)):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for with every alias expanded (each node counted once)."""
    found = sizes.get(id(node))
    if found is not None:
        return found
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(key, sizes) + _expanded_size(value, sizes) for key, value in node.value)
    sizes[id(node)] = size
    return size


def parse_yaml(text: str) -> Any:
    """The data of a YAML text, or a YamlProblem (or ``yaml.YAMLError``) saying what is wrong."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_VALUES:
            raise YamlProblem(f"its aliases expand to {size:,} values (more than {MAX_VALUES:,}); "
                              "a dataset config needs a few dozen")
        return loader.construct_document(node)
    finally:
        loader.dispose()

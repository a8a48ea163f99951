"""Reading YAML as augcse reads every recipe, grid, override and data file: a key written twice is refused.

YAML itself keeps the last of two equal keys in one mapping without a word, so ``loss: {name: simcse,
name: ct}`` would train CT. :func:`load` refuses it in one line naming both lines; merge keys (``<<``) may
still be overridden, as YAML intends.
"""

from __future__ import annotations

from typing import Any

import yaml

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser where PyYAML has it: the task registry is large


class DuplicateKeyError(yaml.YAMLError):
    """A mapping with a key written twice; ``str()`` is one line, ``problem_mark`` where the second one is."""

    def __init__(self, key: Any, first: int, mark: yaml.Mark) -> None:
        super().__init__()
        self.key, self.first, self.problem_mark = key, first, mark

    def __str__(self) -> str:
        return (f"line {self.problem_mark.line + 1}: key {self.key!r} is written twice in one mapping (first on "
                f"line {self.first}); YAML would keep only the last: remove one")


# a document's aliases may expand it to this many values (or characters of scalars), or to this many times the
# values (characters) it writes if larger; a value may sit this many collections deep
MAX_EXPANDED, MAX_EXPANDED_CHARS, MAX_EXPANSION, MAX_DEPTH = 100_000, 10_000_000, 10, 100


class AliasBombError(yaml.YAMLError):
    """Aliases that expand without bound (or refer to themselves), or nesting too deep; ``str()`` is one line."""

    def __init__(self, mark: yaml.Mark, why: str, fix: str = "write the values out instead of nesting aliases") -> None:
        super().__init__()
        self.problem_mark, self.why, self.fix = mark, why, fix

    def __str__(self) -> str:
        return f"line {self.problem_mark.line + 1}: {self.why}; {self.fix}"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _chars(node: yaml.Node) -> int:
    return len(node.value) if isinstance(node, yaml.ScalarNode) else 0


def check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand beyond the bounds above (in values or in characters), that holds
    a cycle, or that nests deeper than :data:`MAX_DEPTH`.

    The walk keeps its own stack, so no document can exhaust Python's: a shared node is sized once, and the
    sizes of a node's expansion are the sums of its children's."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (values, characters) the node expands to
    distinct: dict[int, int] = {}  # id -> characters it writes itself
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            parts = [sizes[id(child)] for child in _children(node)]
            sizes[key] = (1 + sum(v for v, _ in parts), _chars(node) + sum(c for _, c in parts))
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise AliasBombError(node.start_mark, "an alias refers to the value that contains it")
        if len(open_nodes) >= MAX_DEPTH:
            raise AliasBombError(node.start_mark, f"values are nested more than {MAX_DEPTH} collections deep",
                                 "flatten the document")
        open_nodes.add(key)
        distinct[key] = _chars(node)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(_children(node)))
    values, chars = sizes[id(root)]
    written = sum(distinct.values())
    if values > max(MAX_EXPANDED, MAX_EXPANSION * len(distinct)):
        raise AliasBombError(root.start_mark, f"the document's aliases expand its {len(distinct):,} values to "
                                              f"{values:,} (more than {MAX_EXPANSION}× and {MAX_EXPANDED:,})")
    if chars > max(MAX_EXPANDED_CHARS, MAX_EXPANSION * written):
        raise AliasBombError(root.start_mark, f"the document's aliases expand its {written:,} characters to "
                                              f"{chars:,} (more than {MAX_EXPANSION}× and {MAX_EXPANDED_CHARS:,})")


class StrictLoader(_Base):
    """A safe loader that refuses duplicate keys and aliases that expand without bound."""

    def construct_document(self, node: yaml.Node) -> Any:
        check_expansion(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], key_node.start_mark)
            except TypeError:  # an unhashable key: the base constructor refuses it in its own words
                continue
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load(text: str) -> Any:
    """``yaml.safe_load`` that refuses a key written twice (:class:`DuplicateKeyError`) and aliases that expand
    without bound (:class:`AliasBombError`), both ``yaml.YAMLError``."""
    return yaml.load(text, Loader=StrictLoader)


def describe(exc: yaml.YAMLError) -> str:
    """A YAML error as one line with where it is: ``line L, column C: what`` (the parser's own text is several)."""
    if isinstance(exc, (DuplicateKeyError, AliasBombError)):
        return str(exc)
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["not valid YAML"])[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem

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


class StrictLoader(_Base):
    """A safe loader that refuses duplicate keys."""

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
    """``yaml.safe_load`` that refuses a key written twice (:class:`DuplicateKeyError`, a ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=StrictLoader)

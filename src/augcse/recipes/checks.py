"""Value checks against type hints and ranges, shared by every part of a recipe that is validated up front.

A recipe value is checked against the annotation of the field or argument it fills: ``int``, ``float``
(an integer is accepted), ``bool``, ``str``, ``list[X]``, ``dict``, ``Literal[...]``, an ``Enum`` (by
value), ``X | None`` and unions of those. Anything else (callables, classes) is not checked here.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin


def _enum_values(kind: type[enum.Enum]) -> list[Any]:
    return [member.value for member in kind]


def describe(hint: Any) -> str:
    """A short human name for a type hint (``a positive integer``, ``one of a, b``…)."""
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return " or ".join(describe(arm) for arm in get_args(hint) if arm is not type(None))
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(str(v) for v in _enum_values(hint))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping"}
    return names.get(origin or hint, getattr(hint, "__name__", str(hint)))


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML gives it) fits ``hint``; unknown kinds of hint accept anything."""
    if hint is Any or hint is None:
        return True
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        arms = get_args(hint)
        enums = [a for a in arms if isinstance(a, type) and issubclass(a, enum.Enum)]
        if enums and isinstance(value, str):  # ``SchedulerType | str``: the string must name a member
            return any(value in _enum_values(e) for e in enums)
        return any(conforms(value, arm) for arm in arms)
    if hint is type(None):
        return value is None
    if origin is Literal:
        return value in get_args(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(value, hint) or value in _enum_values(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        inner = get_args(hint)
        return not inner or all(conforms(v, inner[0]) for v in value)
    if origin is dict or hint is dict or origin is Mapping:
        return isinstance(value, dict)
    return True


def check_value(key: str, value: Any, hint: Any) -> None:
    """Raise ``ValueError`` with one line when ``value`` does not fit ``hint``."""
    if not conforms(value, hint):
        raise ValueError(f"recipe key {key!r} must be {describe(hint)}, got {value!r}")


def check_range(key: str, value: Any, low: float | None = None, high: float | None = None,
                low_open: bool = False) -> None:
    """Raise ``ValueError`` when a number lies outside ``[low, high]`` (``(low, high]`` when ``low_open``)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        bounds = f"{'>' if low_open else '≥'} {low}" if high is None else \
            f"in {'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"recipe key {key!r} must be {bounds}, got {value!r}")
